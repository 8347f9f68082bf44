from __future__ import annotations

import json
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from backendmgr.emit.tools import tool_parser
from tests.support.cli import Cli
from tests.support.ggufs import QWEN3_5_WRAPPER, write_hf


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


def test_qwen3_5_wrapper_gets_its_parser_through_the_cli(
    cli: Cli, tmp_path: Path, config_path: Path
) -> None:
    """The top-level model_type (qwen3_5) keys the table, not text_config's qwen3_5_text."""
    root = tmp_path / "models"
    write_hf(root / "Qwen3.5-9B", QWEN3_5_WRAPPER, weights=1 << 20)
    config_path.parent.mkdir(parents=True, exist_ok=True)
    config_path.write_text(
        f"models_dirs: [{json.dumps(str(root))}]\n"
        "backends:\n  - id: vllm\n    kind: vllm\n    path: /opt/vllm/bin/vllm\n"
    )
    result = cli("generate")
    assert result.code == 0, result
    data = YAML(typ="safe").load((config_path.parent / "llama-swap.yaml").read_text())
    entry = data["models"]["qwen3.5-9b-bf16"]
    assert entry["cmd"].splitlines()[-1] == (
        "--enable-auto-tool-choice --tool-call-parser qwen3_coder"
    )
    assert entry["capabilities"]["tools"] is True
