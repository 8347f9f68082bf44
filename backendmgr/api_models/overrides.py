"""The per-model overrides: ``set``/``unset`` (``pin`` and the models folders have modules of
their own: an edit makes only its own result's class)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ._shared import Previewed

__all__ = ["ModelSettingsResult"]


@dataclass(kw_only=True, repr=False, eq=False)
class ModelSettingsResult(Previewed):
    """``set``/``unset``: the model id and its overrides as stored (only those set)."""

    model: str
    backend: str | None = None
    ctx: int | None = None
    vram_target_gb: float | None = None
    vllm_gpu_util: float | None = None
    vllm_tensor_parallel: int | None = None
    vllm_tokenizer: str | None = None
    vllm_tool_parser: str | None = None
    extra_args: str | None = None
    unlisted: bool | None = None
    llama_swap: dict[str, Any] | None = None  # passed through to llama-swap as the user wrote it
    device: str | None = None  # "1", "0,1": the GPUs the model runs on (issue 24)
    env: list[str] | None = None  # KEY=VALUE words set after the device's variables
