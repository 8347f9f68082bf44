"""vLLM tool-call parsers by model family (SPEC §12.4).

Short on purpose: a wrong parser does not fail, it silently leaves tool calls as plain text,
which is worse than the HTTP 400 vLLM gives without one.
"""

from __future__ import annotations

__all__ = ["tool_parser"]

_TABLE = {
    "qwen2": "hermes",
    "qwen2_moe": "hermes",
    "qwen2moe": "hermes",
    "qwen3": "hermes",
    "qwen3_moe": "hermes",
    "qwen3moe": "hermes",
    "qwen3_5": "qwen3_coder",
    "qwen35": "qwen3_coder",
    "llama": "llama3_json",
}
_QWEN3 = frozenset({"qwen3", "qwen3_moe", "qwen3moe"})


def tool_parser(architecture: str, model_id: str, override: str | None) -> tuple[str | None, str]:
    """The parser, or None, and a reason worth a comment when there is none."""
    if override:
        if override.strip().lower() == "none":
            return None, "tool calling turned off (vllm_tool_parser: none)"
        return override.strip(), f"tool parser {override.strip()} (override)"
    arch = architecture.lower()
    parser = _TABLE.get(arch)
    if parser is None:
        return (
            None,
            f'no tool-call parser known for architecture "{architecture or "?"}"; '
            "set vllm_tool_parser to enable tool calls",
        )
    if arch in _QWEN3 and "coder" in model_id.lower():
        parser = "qwen3_coder"
    return parser, f"tool parser {parser} ({arch})"
