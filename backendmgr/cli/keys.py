"""The keys ``set`` and ``unset`` take, with a line of help each: data only, so that
``set M <TAB>`` offers them without loading the command (nor argparse, nor the requests)."""

from __future__ import annotations

__all__ = ["KEY_HELP"]

# for ``set --help`` too; a test keeps the keys equal to SETTABLE_KEYS
KEY_HELP: dict[str, str] = {
    "ctx": "context length in tokens (a warning above the model's trained context)",
    "vram_target_gb": "VRAM to size this model for, in GB",
    "vllm_gpu_util": "vLLM --gpu-memory-utilization, above 0 and at most 1",
    "vllm_tensor_parallel": "vLLM --tensor-parallel-size, 1 or more",
    "vllm_tokenizer": "vLLM --tokenizer (a Hugging Face repo id or folder)",
    "vllm_tool_parser": 'vLLM --tool-call-parser; "none" turns tool calling off',
    "extra_args": 'more arguments, split like a shell would (e.g. "--seed 1")',
    "unlisted": "true hides the model from llama-swap's list",
    "llama_swap": "a YAML mapping merged into the model's llama-swap entry",
    "device": 'the GPU(s) the model runs on: "1", or "0,1"; the build\'s vendor variables',
    "env": 'KEY=VALUE words for its process (e.g. "GGML_CUDA_ENABLE_UNIFIED_MEMORY=1")',
}
