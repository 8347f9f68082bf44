from __future__ import annotations

import pytest

from backendmgr.emit.tools import tool_parser


@pytest.mark.parametrize(
    ("arch", "model_id", "override", "parser"),
    [
        ("qwen3", "qwen3-8b-q4_k_m", None, "hermes"),
        ("qwen3", "qwen3-coder-30b-a3b", None, "qwen3_coder"),
        ("qwen3moe", "qwen3-coder-30b-a3b-instruct-q4_k_m", None, "qwen3_coder"),
        ("qwen3_moe", "qwen3-30b-a3b", None, "hermes"),
        ("qwen2", "qwen2.5-7b", None, "hermes"),
        ("qwen2", "qwen2.5-coder-7b", None, "hermes"),  # only qwen3 has the coder switch
        ("qwen2moe", "x", None, "hermes"),
        ("qwen3_5", "x", None, "qwen3_coder"),
        ("llama", "llama-3.1-8b", None, "llama3_json"),
        ("gemma3", "gemma-3-4b", None, None),
        ("qwen3", "qwen3-8b", "none", None),
        ("gemma3", "gemma-3-4b", "pythonic", "pythonic"),
    ],
)
def test_tool_parser(arch: str, model_id: str, override: str | None, parser: str | None) -> None:
    assert tool_parser(arch, model_id, override)[0] == parser


def test_unknown_arch_says_why() -> None:
    assert "no tool-call parser known" in tool_parser("mamba", "m", None)[1]
