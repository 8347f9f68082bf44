"""``verify --repair`` on a host without a GPU (issue 29): it tries the activated build first,
then the builds this host can use, newest first, and a GPU build only when nothing else
serves; it says why it chose the one it pinned. Real installs from the loopback mirror, each
build's server replaced by a stand-in that serves (or fails) as the test says."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from backendmgr.mirror import MirrorServer
from tests.support import publish_llama
from tests.support.cli import Cli, ok
from tests.support.ggufs import write_gguf
from tests.support.measure_standins import write_server

MIB = 1 << 20


def server(home: Path, build: str, **behaviour: Any) -> None:
    """The installed build's llama-server, now a stand-in behaving as told."""
    exe = home / "builds" / "llama-server" / build / "build" / "bin" / "llama-server"
    write_server(exe, name=build, **behaviour)


def tried(fake: Path) -> list[str]:
    path = fake / "starts"
    rows = [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []
    return [r[0] for r in rows]  # the build's name: b100-cpu, …


def test_repair_on_a_cpu_host_prefers_builds_it_can_use(
    cli: Cli,
    mirror: MirrorServer,
    mirror_root: Path,
    tmp_path: Path,
    config_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    home = tmp_path / "home"
    fake = tmp_path / "fake"
    fake.mkdir()
    models = tmp_path / "models"
    write_gguf(models / "chat.gguf", "qwen3", layers=4, ctx=8192, size_bytes=MIB)
    broken = write_server(tmp_path / "opt" / "broken" / "llama-server", fail="lib")
    config_path.parent.mkdir(parents=True, exist_ok=True)
    config_path.write_text(
        json.dumps(
            {
                "models_dirs": [str(models)],
                "backends": [{"id": "broken", "kind": "llama", "path": str(broken)}],
                "models": {"chat": {"backend": "broken"}},
            }
        )
    )
    publish_llama(mirror_root, "b100", ["cpu"], published_at="2026-09-01T00:00:00Z")
    publish_llama(mirror_root, "b200", ["cpu", "vulkan"], published_at="2026-09-20T00:00:00Z")
    ok(cli("install", "llama-server", "b100", "--variant", "cpu"))  # the first: activated
    ok(cli("install", "llama-server", "b200", "--variant", "vulkan"))
    ok(cli("install", "llama-server", "b200", "--variant", "cpu"))
    for build in ("b100-cpu", "b200-cpu", "b200-vulkan"):
        server(home, build)
    monkeypatch.setenv("BACKENDMGR_GPU", "none")  # this host has no GPU
    monkeypatch.setenv("FAKE_DIR", str(fake))
    assert os.environ["BACKENDMGR_GPU"] == "none"

    first = ok(cli("verify", "--repair", "--timeout", "20"))
    assert (
        "chat: pinned to llama-server@b100-cpu (failed on broken): the activated build of "
        "llama-server" in first.out
    )
    assert tried(fake)[-1] == "b100-cpu"  # the newer vulkan build was never started

    # the activated build fails too: the newest build this host can use, still no GPU build
    server(home, "b100-cpu", fail="lib")
    ok(cli("pin", "chat", "broken"))
    (fake / "starts").unlink()
    doc = json.loads(ok(cli("verify", "--repair", "--timeout", "20", "--json")).out)
    (fixed,) = doc["repair"]["results"]
    assert fixed["pinned"] == "llama-server@b200-cpu"
    assert fixed["why"] == "a cpu build, which this host can use (no GPU adapter found)"
    whys = [a["why"] for a in fixed["tried"]]
    assert whys == ["the row it runs on now", "the activated build of llama-server", fixed["why"]]
    assert "b200-vulkan" not in tried(fake)

    # only the GPU build is left: it is tried, last, and the reason says so
    server(home, "b200-cpu", fail="lib")
    ok(cli("pin", "chat", "broken"))
    last = ok(cli("verify", "--repair", "--timeout", "20"))
    assert (
        "pinned to llama-server@b200-vulkan (failed on broken, llama-server@b100-cpu, "
        "llama-server@b200-cpu): a vulkan build, tried last: no GPU adapter found for vulkan"
    ) in last.out
