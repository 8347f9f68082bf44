"""The emitter consults the resolved build: flags it does not list are left out with a NOTE,
and a model that needs a missing one is SKIPPED naming the builds that have it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from backendmgr.mirror import MirrorServer
from tests.support import ok, publish_llama
from tests.support.cli import Cli
from tests.support.ggufs import write_gguf
from tests.support.standins import NEW_HELP, OLD_HELP

GIB = 1 << 30
OLD = "llama-server@b100-vulkan"
NEW = "llama-server@b200-vulkan"
BARE = "llama-server@b300-vulkan"


@pytest.fixture
def output(
    cli: Cli,
    mirror: MirrorServer,
    mirror_root: Path,
    tmp_path: Path,
    config_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Path:
    monkeypatch.setenv("BACKENDMGR_VRAM_GB", "24")
    root = tmp_path / "models"
    write_gguf(root / "qwen3-8b.gguf", "qwen3", layers=36, kv_heads=8, ctx=40960)
    write_gguf(root / "vision" / "Qwen2.5-VL-7B.gguf", "qwen2vl", layers=28, kv_heads=4)
    write_gguf(root / "vision" / "mmproj-Qwen2.5-VL-7B.gguf", "clip", general_type="mmproj")
    write_gguf(
        root / "embed" / "nomic-embed.gguf", "nomic-bert", layers=12, heads=12, kv_heads=12,
        key=64, value=64, ctx=2048, pooling=1,
    )  # fmt: skip
    write_gguf(
        root / "embed" / "bge-reranker.gguf", "bert", layers=24, heads=16, kv_heads=16,
        key=64, value=64, ctx=8192, pooling=4,
    )  # fmt: skip
    config_path.parent.mkdir(parents=True, exist_ok=True)
    config_path.write_text(f"models_dirs: [{json.dumps(str(root))}]\n")
    publish_llama(mirror_root, "b100", help_text=OLD_HELP, published_at="2026-09-01T00:00:00Z")
    publish_llama(mirror_root, "b200", help_text=NEW_HELP, published_at="2026-09-02T00:00:00Z")
    publish_llama(mirror_root, "b300", published_at="2026-09-03T00:00:00Z")  # no real --help
    ok(cli("install", "llama-server", "b200"))  # activated: every unpinned model runs it
    ok(cli("install", "llama-server", "b100"))
    ok(cli("install", "llama-server", "b300"))
    return config_path.parent / "llama-swap.yaml"


def models(output: Path) -> dict[str, Any]:
    data = YAML(typ="safe").load(output.read_text())
    assert isinstance(data, dict)
    return dict(data["models"])


def comments_above(text: str, model_id: str) -> list[str]:
    """The comment lines directly above a model's key."""
    lines = text.splitlines()
    at = lines.index(f"  {model_id}:")
    above = []
    for line in reversed(lines[:at]):
        if not line.strip().startswith("#"):
            break
        above.append(line.strip())
    return above[::-1]


def test_new_build_gets_every_flag(cli: Cli, output: Path) -> None:
    ok(cli("generate", "--force"))
    got = models(output)
    assert "--jinja" in got["qwen3-8b"]["cmd"].splitlines()
    assert got["qwen2.5-vl-7b"]["cmd"].count("--mmproj") == 1
    assert got["nomic-embed"]["cmd"].splitlines()[-2:] == ["--embedding", "--pooling mean"]
    assert got["bge-reranker"]["cmd"].splitlines()[-1] == "--reranking"
    assert "left out" not in output.read_text()


def test_pinned_old_build_leaves_out_flags_and_skips_what_it_cannot_run(
    cli: Cli, output: Path
) -> None:
    for model in ("qwen3-8b", "qwen2.5-vl-7b", "nomic-embed", "bge-reranker"):
        ok(cli("pin", model, OLD))
    text = output.read_text()
    got = models(output)
    chat = got["qwen3-8b"]
    assert "--jinja" not in chat["cmd"] and chat["metadata"]["build"] == OLD
    assert f"# NOTE --jinja left out: {OLD} does not list it in --help" in comments_above(
        text, "qwen3-8b"
    )
    embed = got["nomic-embed"]["cmd"].splitlines()
    assert embed[-1] == "--embedding" and "--pooling" not in got["nomic-embed"]["cmd"]
    assert f"# NOTE --pooling left out: {OLD} does not list it in --help" in comments_above(
        text, "nomic-embed"
    )
    assert "bge-reranker" not in got and "qwen2.5-vl-7b" not in got
    assert (
        f'# SKIPPED "bge-reranker": {OLD} does not list --reranking, which a reranker model '
        f"needs; pin it to {NEW}" in text
    )
    assert (
        f'# SKIPPED "qwen2.5-vl-7b": {OLD} does not list --mmproj, which a model with a '
        f"projector needs; pin it to {NEW}" in text
    )
    refused = cli("cmd", "bge-reranker")
    assert refused.code != 0 and f"pin it to {NEW}" in refused.err
    listed = {m["id"]: m for m in json.loads(ok(cli("--json", "models")).out)}
    assert "does not list --reranking" in listed["bge-reranker"]["skipped"]
    assert "--jinja left out" in " ".join(listed["qwen3-8b"]["notes"])
    ok(cli("generate", "--check"))  # the written file matches its plan
    ok(cli("doctor"))
    # back on the new build, everything returns
    ok(cli("pin", "bge-reranker", NEW))
    assert models(output)["bge-reranker"]["cmd"].splitlines()[-1] == "--reranking"


def test_unknown_capabilities_emit_as_before(cli: Cli, output: Path) -> None:
    for model in ("qwen3-8b", "bge-reranker"):
        ok(cli("pin", model, BARE))
    got = models(output)
    assert "--jinja" in got["qwen3-8b"]["cmd"].splitlines()
    assert got["bge-reranker"]["cmd"].splitlines()[-1] == "--reranking"
    assert "left out" not in output.read_text()


def test_extra_args_the_build_does_not_list_get_a_note_and_stay(cli: Cli, output: Path) -> None:
    ok(cli("pin", "qwen3-8b", OLD))
    ok(cli("set", "qwen3-8b", "extra_args=-fa on --no-mmap -c 8192"))
    text = output.read_text()
    cmd = models(output)["qwen3-8b"]["cmd"]
    assert cmd.splitlines()[-1] == "-fa on --no-mmap -c 8192"  # the user's words stand
    notes = comments_above(text, "qwen3-8b")
    assert any(
        n.startswith(f"# NOTE extra_args --no-mmap -fa not listed by {OLD} --help") for n in notes
    ), notes


def test_no_build_has_it(cli: Cli, output: Path, tmp_path: Path) -> None:
    """A manual row probed on first use: its lacks are named, and no build is offered when
    none of the installed ones lists the flag either."""
    exe = tmp_path / "mine" / "llama-server"
    exe.parent.mkdir()
    help_text = OLD_HELP.replace("--embedding ", "--other     ")
    exe.write_text(f"#!/bin/sh\ncat <<'END'\n{help_text}\nEND\n")
    exe.chmod(0o755)
    ok(cli("backends", "add", "mine", "--kind", "llama.cpp", "--path", str(exe)))
    ok(cli("pin", "nomic-embed", "mine"))
    ok(cli("pin", "bge-reranker", "mine"))
    text = output.read_text()
    assert '# SKIPPED "nomic-embed": mine does not list --embedding, which an embedding model ' in (
        text
    )
    assert f"pin it to one of {NEW}, {OLD}" in text  # both installed builds embed
    assert f"needs; pin it to {NEW}" in text  # only b200 reranks
    ok(cli("activate", OLD))
    ok(cli("uninstall", NEW))
    assert (
        '# SKIPPED "bge-reranker": mine does not list --reranking, which a reranker model needs; '
        "no installed build lists it" in output.read_text()
    )
