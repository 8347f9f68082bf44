"""The first hour of a new user (issue 20, points 7, 8 and 11): what ``verify`` did not check,
what a slow probe waits for, and a value that does not parse for its key; each through the
real CLI in this process."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.cli import CliResult
from tests.support.ggufs import write_gguf
from tests.support.standins import SERVER_STANDIN

Cli = Callable[..., CliResult]
MIB = 1 << 20


def _exe(path: Path, body: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!{sys.executable}\n{body}")
    path.chmod(0o755)
    return path


@pytest.fixture
def three_models(tmp_path: Path, config_path: Path) -> Path:
    """chat, embed and rank, served by the stand-in server; chat's crashes at start."""
    server = _exe(tmp_path / "bin" / "llama-server", SERVER_STANDIN)
    root = tmp_path / "models"
    write_gguf(root / "chat.gguf", "qwen3", layers=4, ctx=8192, size_bytes=MIB)
    write_gguf(root / "embed.gguf", "bert", layers=4, ctx=512, pooling=1, size_bytes=MIB)
    write_gguf(root / "rank.gguf", "bert", layers=4, ctx=512, pooling=4, size_bytes=MIB)
    config_path.parent.mkdir(parents=True, exist_ok=True)
    config_path.write_text(
        f"models_dirs: [{json.dumps(str(root))}]\n"
        f"backends:\n  - {{id: fake-llama, kind: llama, path: {json.dumps(str(server))}}}\n"
        "models:\n  chat: {extra_args: '--fake-mode crash'}\n"
    )
    return config_path


# --- 7: verify names what it did not check --------------------------------------------------


def test_verify_stopping_at_a_failure_names_the_models_it_did_not_check(
    cli: Cli, three_models: Path
) -> None:
    result = cli("verify", "--timeout", "5")
    assert result.code == 1, result
    assert "Traceback" not in result.err, result.err
    assert result.out.startswith("chat: failed: exited with status 3")
    assert "embed" not in result.out and "rank" not in result.out  # neither was started
    last = result.err.strip().splitlines()[-1]
    assert last.startswith("error: 1 of 3 models failed verification: chat; ")
    assert "2 not checked after the first failure: embed, rank" in last
    assert "--keep-going" in last and "backendmgr verify embed rank" in last

    doc = json.loads(cli("verify", "--timeout", "5", "--json").out)
    assert [r["id"] for r in doc["results"]] == ["chat"] and doc["failed"] == 1
    assert doc["unchecked"] == ["embed", "rank"]

    # the way out it named works: both are checked, and nothing is left unchecked
    named = cli("verify", "embed", "rank", "--timeout", "20", "--json")
    assert named.code == 0, named
    assert json.loads(named.out)["unchecked"] == []
    every = cli("verify", "--keep-going", "--timeout", "20")
    assert every.code == 1
    assert every.err.strip().splitlines()[-1] == ("error: 1 of 3 models failed verification: chat")
    assert [line.split(":")[0] for line in every.out.splitlines()] == ["chat", "embed", "rank"]
