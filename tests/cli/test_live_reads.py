"""Reads are computed live (issue 30): change each input a read depends on, and the very next
read, a fresh process through the real console entry point, shows it. Nothing a read prints is
ever stored and replayed; only inputs are cached, each keyed by what it was computed from."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import Cli, run_backendmgr
from tests.support.ggufs import write_gguf
from tests.support.measure_standins import write_server

GIB = 1 << 30
MIB = 1 << 20

NVIDIA_SMI = f"""#!{sys.executable}
import os, sys
if not os.path.exists(os.path.join(os.environ["FAKE_DIR"], "gpu")):
    print("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.")
    sys.exit(9)
query = next((a for a in sys.argv[1:] if a.startswith("--query-gpu=")), "")
if query == "--query-gpu=memory.total":
    print("143771")
elif query.startswith("--query-gpu="):
    print("NVIDIA H200, 550.54.15, 143771")
else:
    sys.exit(2)
"""


def read(*args: str) -> Any:
    """One read in a fresh process, as a user runs it: its JSON document."""
    done = run_backendmgr("--json", *args)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def text(*args: str) -> str:
    done = run_backendmgr(*args)
    assert done.returncode == 0, done.stderr
    return done.stdout + done.stderr


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "fake"
    folder.mkdir()
    monkeypatch.setenv("FAKE_DIR", str(folder))
    return folder


def write_config(config: Path, doc: dict[str, Any]) -> None:
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(json.dumps(doc))  # JSON is YAML


def test_a_gpu_that_appears_is_sized_for_at_the_next_read(
    tmp_path: Path, config_path: Path, fake: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A driver loaded after boot: ``nvidia-smi`` first fails, then reports an H200."""
    models = tmp_path / "models"
    write_gguf(models / "big.gguf", "qwen3", layers=36, ctx=131072, size_bytes=GIB)
    server = write_server(tmp_path / "bin" / "srv" / "llama-server")
    write_config(
        config_path,
        {
            "models_dirs": [str(models)],
            "backends": [{"id": "srv", "kind": "llama", "path": str(server), "default": True}],
        },
    )
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "nvidia-smi").write_text(NVIDIA_SMI)
    (tools / "nvidia-smi").chmod(0o755)
    monkeypatch.delenv("BACKENDMGR_GPU")
    monkeypatch.setenv("PATH", f"{tools}{os.pathsep}{os.environ['PATH']}")
    before = text("models")
    assert "no VRAM budget" in before
    (fake / "gpu").touch()
    after = text("models")
    assert "no VRAM budget" not in after and "131072" in after
    (fake / "gpu").unlink()
    assert "no VRAM budget" in text("models")  # and back: nothing remembered either way


def test_a_bare_name_counts_when_path_has_it_never_the_current_folder(
    tmp_path: Path, config_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_config(config_path, {"backends": [{"id": "mine", "kind": "custom", "path": "my-srv"}]})
    work = tmp_path / "work"
    work.mkdir()
    tools = tmp_path / "tools"
    tools.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv("PATH", f"{tools}{os.pathsep}{os.environ['PATH']}")

    def exists() -> bool:
        found: bool = read("which", "mine")["exists"]
        return found

    assert exists() is False
    (work / "my-srv").write_text("#!/bin/sh\n")  # the current folder: neither a shell's
    (work / "my-srv").chmod(0o755)  # nor llama-swap's lookup finds it there
    assert exists() is False
    shutil.move(work / "my-srv", tools / "my-srv")
    assert exists() is True
    (tools / "my-srv").unlink()
    assert exists() is False


def test_a_models_folder_that_becomes_a_file_is_said_at_the_next_read(
    tmp_path: Path, config_path: Path
) -> None:
    models = tmp_path / "models"
    write_config(config_path, {"models_dirs": [str(models)]})
    missing = text("models")
    models.write_text("not a folder\n")
    as_file = text("models")
    assert as_file != missing and "not a folder" in as_file
    models.unlink()
    models.mkdir()
    write_gguf(models / "small.gguf", "llama", layers=2, ctx=4096, size_bytes=MIB)
    assert [m["id"] for m in read("models")] == ["small"]


def test_verify_and_tune_results_show_at_the_next_read(
    tmp_path: Path, config_path: Path, fake: Path, cli: Cli
) -> None:
    models = tmp_path / "models"
    write_gguf(models / "chat.gguf", "qwen3", layers=4, ctx=32768, size_bytes=MIB)
    server = write_server(tmp_path / "bin" / "srv" / "llama-server", k=64)
    write_config(
        config_path,
        {
            "models_dirs": [str(models)],
            "backends": [{"id": "srv", "kind": "llama", "path": str(server), "default": True}],
        },
    )
    assert "not verified" in text("models")
    assert cli("verify", "--timeout", "20").code == 0  # writes <home>/verify.json
    assert "verified today: ok" in text("models")
    assert cli("tune", "chat", "--budget", "1").code == 0  # writes <home>/tuned.json
    assert "from tuning: " in text("models")
    # ``which MODEL`` plans that model alone: the tuned plan, as ``models`` shows it
    (shown,) = read("models")
    which = read("which", "chat")
    assert which["notes"] == shown["notes"] and which["reason"] == shown["backend"]["reason"]
    assert any("from tuning: " in note for note in which["notes"])


def test_a_manual_rows_capabilities_follow_its_cache(
    tmp_path: Path, config_path: Path, fake: Path
) -> None:
    """The probe's cache (``<home>/cache/capabilities.json``, by path, size and mtime): what
    it holds is what the next read shows, and a changed executable is probed again."""
    server = write_server(tmp_path / "bin" / "srv" / "llama-server")
    write_config(config_path, {"backends": [{"id": "srv", "kind": "llama", "path": str(server)}]})
    first = read("backends")
    cache = tmp_path / "home" / "cache" / "capabilities.json"
    data = json.loads(cache.read_text())
    (entry,) = data["entries"].values()
    assert json.dumps(entry[2]["version"]) in json.dumps(first)
    assert entry[2]["version"] != "12345"
    entry[2]["version"] = "12345"
    cache.write_text(json.dumps(data))
    second = read("backends")
    assert second != first and "12345" in json.dumps(second)
    server.write_text(server.read_text() + "\n")  # a new build: probed again
    assert "12345" not in json.dumps(read("backends"))


def test_the_package_version_is_read_live(tmp_path: Path) -> None:
    """An upgraded install: the next run says the new version (a copy of the package whose
    version file says another)."""
    import backendmgr

    copy = tmp_path / "site" / "backendmgr"
    shutil.copytree(Path(backendmgr.__file__).parent, copy)
    assert f"backendmgr {backendmgr.__version__}" in text("--version")
    version = copy / "_version.py"
    version.write_text(version.read_text().replace(backendmgr.__version__, "99.0.0"))
    done = subprocess.run(
        [sys.executable, "-m", "backendmgr", "--version"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(copy.parent)},
        cwd=tmp_path,  # not the checkout, whose package would come first
        timeout=60,
        check=False,
    )
    assert done.stdout.strip() == "backendmgr 99.0.0", done.stderr


def test_a_hand_edit_of_the_config_shows_at_the_next_read(config_path: Path, cli: Cli) -> None:
    """The parsed snapshot is a cache of the config's bytes: an edit that keeps the size and
    the mtime is still read, and a write through backendmgr leaves a snapshot of what it wrote."""
    rows = [{"id": "a", "kind": "custom", "path": "/opt/a"}]
    write_config(config_path, {"backends": rows})
    assert [r["id"] for r in read("backends")] == ["a"]
    stat = config_path.stat()
    config_path.write_text(config_path.read_text().replace('"a"', '"b"'))
    os.utime(config_path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert [r["id"] for r in read("backends")] == ["b"]
    assert cli("backends", "add", "c", "--kind", "custom", "--path", "/opt/c", "--force").code == 0
    assert [r["id"] for r in read("backends")] == ["b", "c"]
