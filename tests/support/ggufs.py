"""Real GGUF files, written with llama.cpp's own ``gguf`` package, and HF-shaped folders."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import gguf
import numpy as np


def write_gguf(
    path: Path,
    arch: str = "qwen3",
    *,
    name: str | None = None,
    layers: int = 48,
    heads: int = 32,
    kv_heads: int | list[int] = 8,
    key: int | None = 128,
    value: int | None = 128,
    ctx: int | None = 262144,
    embd: int = 4096,
    general_type: str | None = None,
    pooling: int | None = None,
    causal: bool | None = None,
    extra: dict[str, Any] | None = None,
    vocab: int = 0,
    chat_template: str | None = None,
    size_bytes: int | None = None,
    tensors: int = 1,
) -> Path:
    """A GGUF of the given shape; ``size_bytes`` pads the file (sparsely) to a weight size."""
    path.parent.mkdir(parents=True, exist_ok=True)
    w = gguf.GGUFWriter(str(path), arch)
    w.add_name(name or path.stem)
    if general_type:
        w.add_type(general_type)
    w.add_block_count(layers)
    if ctx is not None:
        w.add_context_length(ctx)
    w.add_embedding_length(embd)
    w.add_head_count(heads)
    w.add_head_count_kv(kv_heads)
    if key is not None:
        w.add_key_length(key)
    if value is not None:
        w.add_value_length(value)
    if pooling is not None:
        w.add_pooling_type(gguf.PoolingType(pooling))
    if causal is not None:
        w.add_causal_attention(causal)
    for k, v in (extra or {}).items():
        if isinstance(v, bool):
            w.add_bool(k, v)
        elif isinstance(v, int):
            w.add_uint32(k, v)
        elif isinstance(v, float):
            w.add_float32(k, v)
        elif isinstance(v, str):
            w.add_string(k, v)
        else:
            w.add_array(k, v)
    if vocab:
        w.add_tokenizer_model("gpt2")
        w.add_token_list([f"tok{i}" for i in range(vocab)])
        w.add_token_types([1] * vocab)
        w.add_token_merges([f"t o{i}" for i in range(vocab)])
    if chat_template:
        w.add_chat_template(chat_template)
    for i in range(tensors):
        w.add_tensor(f"blk.{i}.attn_q.weight", np.zeros((4, 4), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    if size_bytes is not None:
        with path.open("r+b") as fh:
            fh.truncate(max(size_bytes, path.stat().st_size))
    return path


def write_hf(folder: Path, config: dict[str, Any], *, weights: int = 1024, shards: int = 1) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config))
    for i in range(shards):
        with (folder / f"model-{i + 1:05d}-of-{shards:05d}.safetensors").open("wb") as fh:
            fh.truncate(weights)
    return folder


LLAMA3_8B = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "hidden_size": 4096,
    "max_position_embeddings": 8192,
    "torch_dtype": "bfloat16",
}
QWEN3_8B = {
    "architectures": ["Qwen3ForCausalLM"],
    "model_type": "qwen3",
    "num_hidden_layers": 36,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "hidden_size": 4096,
    "head_dim": 128,
    "max_position_embeddings": 40960,
    "torch_dtype": "bfloat16",
}
QWEN2_AWQ = {
    "architectures": ["Qwen2ForCausalLM"],
    "model_type": "qwen2",
    "num_hidden_layers": 28,
    "num_attention_heads": 28,
    "num_key_value_heads": 4,
    "hidden_size": 3584,
    "max_position_embeddings": 32768,
    "torch_dtype": "float16",
    "quantization_config": {"quant_method": "awq", "bits": 4},
}
GEMMA3_WRAPPER = {
    "architectures": ["Gemma3ForConditionalGeneration"],
    "model_type": "gemma3",
    "text_config": {
        "model_type": "gemma3_text",
        "num_hidden_layers": 34,
        "num_attention_heads": 8,
        "num_key_value_heads": 4,
        "hidden_size": 2560,
        "head_dim": 256,
        "max_position_embeddings": 131072,
        "sliding_window": 1024,
        "torch_dtype": "bfloat16",
    },
    "vision_config": {"model_type": "siglip_vision_model"},
}
HYBRID = {
    "architectures": ["Qwen3NextForCausalLM"],
    "model_type": "qwen3_next",
    "num_hidden_layers": 8,
    "num_attention_heads": 16,
    "num_key_value_heads": 2,
    "hidden_size": 2048,
    "head_dim": 256,
    "max_position_embeddings": 262144,
    "layer_types": ["linear_attention", "linear_attention", "linear_attention", "full_attention"]
    * 2,
    "torch_dtype": "bfloat16",
}
T5 = {"architectures": ["T5ForConditionalGeneration"], "model_type": "t5"}
QWEN3_5_WRAPPER = {
    "architectures": ["Qwen3_5ForConditionalGeneration"],
    "model_type": "qwen3_5",
    "text_config": {
        "model_type": "qwen3_5_text",
        "num_hidden_layers": 8,
        "num_attention_heads": 16,
        "num_key_value_heads": 2,
        "hidden_size": 2048,
        "head_dim": 256,
        "max_position_embeddings": 262144,
        "full_attention_interval": 4,
        "torch_dtype": "bfloat16",
    },
    "vision_config": {"model_type": "qwen3_5_vision"},
}
