"""One shape for model metadata, whether it came from a GGUF header or a config.json (§10.2, §10.3).

The sizing math reads only :class:`ModelMeta`, so a GGUF and the HF folder it was converted
from size the same way.
"""

from __future__ import annotations

import math
from typing import Any, Final

__all__ = ["ModelMeta", "gguf_kind", "hf_quant_label", "meta_from_gguf", "meta_from_hf"]


class ModelMeta:
    """What the sizing math and the roles read of a model's header or config.json.

    A plain class, immutable by type (``Final``): a dataclass of 25 fields costs every read
    ~0.6 ms to make (Python 3.11 compiles its ``__init__`` and walks each field), for one
    record a ``which`` makes (issue 30). Nothing checks it: its readers bound every value."""

    __slots__ = (
        "architecture",
        "block_count",
        "causal",
        "context_length",
        "embedding_length",
        "expert_count",
        "full_attention_interval",
        "head_count",
        "head_count_kv",
        "key_length",
        "key_length_swa",
        "kv_lora_rank",
        "name",
        "pooling_type",
        "quant",
        "recurrent_layers",
        "rope_dimension_count",
        "sliding_window",
        "sliding_window_pattern",
        "ssm_conv_kernel",
        "ssm_inner_size",
        "ssm_state_size",
        "type",
        "value_length",
        "value_length_swa",
    )

    def __init__(
        self,
        *,
        architecture: str = "",
        type: str = "",
        name: str = "",
        block_count: int | None = None,
        context_length: int | None = None,
        embedding_length: int | None = None,
        head_count: int | None = None,
        head_count_kv: int | list[int] | None = None,
        key_length: int | None = None,
        value_length: int | None = None,
        key_length_swa: int | None = None,
        value_length_swa: int | None = None,
        sliding_window: int | None = None,
        sliding_window_pattern: int | list[bool] | None = None,
        causal: bool | None = None,
        kv_lora_rank: int | None = None,
        rope_dimension_count: int | None = None,
        full_attention_interval: int | None = None,
        recurrent_layers: list[bool] | None = None,
        ssm_inner_size: int | None = None,
        ssm_state_size: int | None = None,
        ssm_conv_kernel: int | None = None,
        pooling_type: int | None = None,
        expert_count: int | None = None,
        quant: str = "",
    ) -> None:
        self.architecture: Final = architecture
        self.type: Final = type
        self.name: Final = name
        self.block_count: Final = block_count
        self.context_length: Final = context_length
        self.embedding_length: Final = embedding_length
        self.head_count: Final = head_count
        self.head_count_kv: Final = head_count_kv
        self.key_length: Final = key_length
        self.value_length: Final = value_length
        self.key_length_swa: Final = key_length_swa
        self.value_length_swa: Final = value_length_swa
        self.sliding_window: Final = sliding_window
        self.sliding_window_pattern: Final = sliding_window_pattern
        self.causal: Final = causal
        self.kv_lora_rank: Final = kv_lora_rank
        self.rope_dimension_count: Final = rope_dimension_count
        self.full_attention_interval: Final = full_attention_interval
        self.recurrent_layers: Final = recurrent_layers  # HF layer_types: True = a layer with no KV
        self.ssm_inner_size: Final = ssm_inner_size
        self.ssm_state_size: Final = ssm_state_size
        self.ssm_conv_kernel: Final = ssm_conv_kernel
        self.pooling_type: Final = pooling_type
        self.expert_count: Final = expert_count
        self.quant: Final = quant


MAX_INT = 1 << 48  # no count, length or window in a model header comes near this


def _int(value: Any) -> int | None:
    """A count, or None: wrong types (strings, lists, booleans), fractions, infinities and
    absurd magnitudes are unknown, so no sizing formula ever sees 1e308 (it would overflow)."""
    if value is None:  # most keys a header may hold, it does not
        return None
    if type(value) is int:  # the usual count, looked at once
        return value if 0 <= value <= MAX_INT else None
    if isinstance(value, bool):
        return None
    if isinstance(value, float):
        if not math.isfinite(value) or not value.is_integer():
            return None
        value = int(value)
    if isinstance(value, int) and 0 <= value <= MAX_INT:
        return value
    return None


def _first_int(value: Any) -> int | None:
    if isinstance(value, list):
        ints = [i for i in (_int(v) for v in value) if i is not None]
        return max(ints) if ints else None
    return _int(value)


def _ints(value: Any) -> list[int] | None:
    """A per-layer count array, or None when any element is not a count."""
    out = [_int(v) for v in value]
    return None if any(v is None for v in out) else [v for v in out if v is not None]


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def gguf_kind(raw: dict[str, Any]) -> tuple[str, str]:
    """A header's architecture and ``general.type``, as :class:`ModelMeta` reads them: what
    tells a model from a projector or a file that is none (without the rest of the header)."""
    arch = raw.get("general.architecture")
    return (arch if isinstance(arch, str) else ""), _text(raw.get("general.type"))


def meta_from_gguf(raw: dict[str, Any]) -> ModelMeta:
    arch, kind = gguf_kind(raw)
    prefix = arch + "."

    def get(key: str) -> Any:
        return raw.get(prefix + key)

    kv = get("attention.head_count_kv")
    kv_value: int | list[int] | None = _ints(kv) if isinstance(kv, list) else _int(kv)
    pattern = get("attention.sliding_window_pattern")
    pattern_value: int | list[bool] | None
    if isinstance(pattern, list):
        flags = [_int(v) if not isinstance(v, bool) else int(v) for v in pattern]
        pattern_value = None if any(f is None for f in flags) else [bool(f) for f in flags]
    else:
        pattern_value = _int(pattern)
    causal = get("attention.causal")
    return ModelMeta(
        architecture=arch,
        type=kind,
        name=_text(raw.get("general.name")),
        block_count=_int(get("block_count")),
        context_length=_int(get("context_length")),
        embedding_length=_int(get("embedding_length")),
        head_count=_first_int(get("attention.head_count")),
        head_count_kv=kv_value,
        key_length=_int(get("attention.key_length")),
        value_length=_int(get("attention.value_length")),
        key_length_swa=_int(get("attention.key_length_swa")),
        value_length_swa=_int(get("attention.value_length_swa")),
        sliding_window=_int(get("attention.sliding_window")),
        sliding_window_pattern=pattern_value,
        causal=causal if isinstance(causal, bool) else None,
        kv_lora_rank=_int(get("attention.kv_lora_rank")),
        rope_dimension_count=_int(get("rope.dimension_count")),
        full_attention_interval=_int(get("full_attention_interval")),
        ssm_inner_size=_int(get("ssm.inner_size")),
        ssm_state_size=_int(get("ssm.state_size")),
        ssm_conv_kernel=_int(get("ssm.conv_kernel")),
        pooling_type=_int(get("pooling_type")),
        expert_count=_int(get("expert_count")),
    )


_DTYPES = {"bfloat16": "BF16", "float16": "F16", "float32": "F32", "half": "F16", "float": "F32"}
_NO_KV_LAYERS = ("linear", "mamba", "ssm")


def _a_label(text: str) -> bool:
    """Whether a config's quantization method is a name (``awq``, ``compressed-tensors``,
    ``fp8``) fit to end a model id: a crafted one of 3 000 characters made an id that set and
    pin then refused, so such a model could never be configured."""
    return 0 < len(text) <= 32 and text.isascii() and ("_" + text.replace("-", "_")).isidentifier()


def hf_quant_label(config: dict[str, Any]) -> str:
    qc = config.get("quantization_config")
    method = qc.get("quant_method") if isinstance(qc, dict) else None
    if isinstance(method, str) and _a_label(method):
        return method.upper()
    nested = config.get("text_config")
    text: dict[str, Any] = nested if isinstance(nested, dict) else {}
    for source in (config, text):
        dtype = source.get("torch_dtype") or source.get("dtype")
        if isinstance(dtype, str) and dtype in _DTYPES:
            return _DTYPES[dtype]
    return ""


def meta_from_hf(config: dict[str, Any]) -> ModelMeta:
    """Map config.json onto the GGUF fields, conservatively where the file is ambiguous."""
    text = config.get("text_config")
    c = text if isinstance(text, dict) and text else config
    layers = _int(c.get("num_hidden_layers"))
    heads = _int(c.get("num_attention_heads"))
    kv_heads = _int(c.get("num_key_value_heads"))
    hidden = _int(c.get("hidden_size"))
    head_dim = _int(c.get("head_dim"))
    recurrent: list[bool] | None = None
    layer_types = c.get("layer_types")
    if isinstance(layer_types, list) and layers is not None and len(layer_types) == layers:
        recurrent = [
            isinstance(t, str) and t.lower().startswith(_NO_KV_LAYERS) for t in layer_types
        ]
    interval = _int(c.get("full_attention_interval"))
    if recurrent is None and interval and layers:
        recurrent = [(i + 1) % interval != 0 for i in range(layers)]
    mla = _int(c.get("kv_lora_rank"))
    archs = config.get("architectures")
    # SPEC §12.4 keys the tool-call table by the top-level HF model_type: a wrapper's
    # text_config names its own inner type (qwen3_5 wraps qwen3_5_text), which no table knows.
    model_type = _text(config.get("model_type")) or _text(c.get("model_type"))
    return ModelMeta(
        architecture=model_type,
        name=_text(archs[0]) if isinstance(archs, list) and archs else "",
        block_count=layers,
        context_length=_int(c.get("max_position_embeddings")),
        embedding_length=hidden,
        head_count=heads,
        head_count_kv=kv_heads if kv_heads is not None else heads,
        key_length=head_dim,
        value_length=head_dim,
        # sliding-window layers are charged as full attention: no window, no pattern
        kv_lora_rank=mla,
        rope_dimension_count=_int(c.get("qk_rope_head_dim")) if mla else None,
        recurrent_layers=recurrent,
        expert_count=_int(c.get("num_local_experts") or c.get("num_experts")),
        quant=hf_quant_label(config),
    )
