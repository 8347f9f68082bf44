"""``set MODEL KEY=VALUE…`` and ``unset MODEL KEY…``."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from ...requests import SetRequest, UnsetRequest
from ..options import add_request, request_in
from .common import command, report

if TYPE_CHECKING:
    from ...manager import Manager
    from ..render import Renderer
    from .common import Handler


# The keys ``set`` takes, for ``set --help``; a test keeps this equal to SETTABLE_KEYS.
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


def _keys_epilog() -> str:
    width = max(len(k) for k in KEY_HELP)
    lines = [f"  {key:<{width}}  {text}" for key, text in KEY_HELP.items()]
    return "keys:\n" + "\n".join(lines) + '\n\nthe backend is set with "backendmgr pin".'


def _keyed(
    sub: argparse._SubParsersAction[Any], name: str, handler: Handler, help: str
) -> argparse.ArgumentParser:
    """``set`` and ``unset``: a command that lists the keys under its options."""
    epilog = _keys_epilog()
    from ..parser import RawDescriptionHelpFormatter as formatter

    return command(sub, name, handler, help=help, epilog=epilog, formatter_class=formatter)


def register(sub: argparse._SubParsersAction[Any]) -> None:
    p = _keyed(
        sub, "set", set_overrides, "set per-model overrides (ctx, vllm_gpu_util, extra_args, …)"
    )
    add_request(p, SetRequest)
    u = _keyed(sub, "unset", unset_overrides, "clear per-model overrides")
    add_request(u, UnsetRequest)


async def set_overrides(mgr: Manager, args: argparse.Namespace, out: Renderer) -> int:
    return report(out, await mgr.set_overrides(request_in(args, SetRequest)))


async def unset_overrides(mgr: Manager, args: argparse.Namespace, out: Renderer) -> int:
    return report(out, await mgr.unset_overrides(request_in(args, UnsetRequest)))
