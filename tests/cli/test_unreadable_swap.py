"""Issue 33 (5): what backendmgr cannot learn about llama-swap (its service file, its state
record) is a warning on the command that wanted it, never an error on ``backends``, ``set``,
``pin`` or ``generate``; and a FIFO where the state record goes never hangs a command."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from tests.support.cli import CliResult, ok, run_in_process
from tests.support.ggufs import write_gguf

GIB = 1 << 30


def bm(*args: str) -> CliResult:
    return run_in_process(*args)


@pytest.fixture
def world(tmp_path: Path, config_path: Path) -> str:
    root = tmp_path / "models"
    write_gguf(root / "qwen3-8b-q4_k_m.gguf", "qwen3", layers=36, ctx=40960, size_bytes=GIB)
    config_path.parent.mkdir(parents=True)
    config_path.write_text(
        f"models_dirs: [{json.dumps(str(root))}]\n"
        "backends:\n  - {id: llama-src, kind: llama, path: /bin/true}\n"
    )
    return "qwen3-8b-q4_k_m"


def unreadable_service_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[Path, Path | None]:
    """A config folder whose service file cannot be looked at: no search permission for a
    user; for root (who has every permission) a path component longer than any file name."""
    if os.geteuid() != 0:
        folder = tmp_path / "xdg"
        (folder / "systemd" / "user").mkdir(parents=True)
        (folder / "systemd").chmod(0)
        monkeypatch.setenv("XDG_CONFIG_HOME", str(folder))
        return folder, folder / "systemd"
    folder = tmp_path / ("x" * 300)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(folder))
    return folder, None


def test_an_unreadable_service_file_is_a_warning(
    world: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, locked = unreadable_service_folder(tmp_path, monkeypatch)
    try:
        listed = ok(bm("backends"))  # a read asks nothing of llama-swap: nothing to warn about
        assert "warning:" not in listed.err and "error:" not in listed.err, listed.err
        for args in (
            ("set", world, "ctx=4096"),
            ("pin", world, "llama-src"),
            ("generate", "--force"),
            ("--json", "unpin", world),
        ):
            result = ok(bm(*args))
            said = [line for line in result.err.splitlines() if line.startswith("warning: ")]
            assert said == [
                line
                for line in said
                if line.startswith("warning: cannot tell whether llama-swap runs")
            ], (args, result.err)
            assert len(said) == 1, (args, result.err)
            assert '"backendmgr status" shows whether it took the change' in said[0]
    finally:
        if locked is not None:
            locked.chmod(stat.S_IRWXU)


def test_a_fifo_for_the_state_record_hangs_nothing(world: str, tmp_path: Path) -> None:
    swap = tmp_path / "home" / "swap"
    swap.mkdir(parents=True)
    os.mkfifo(swap / "up.json")
    ok(bm("set", world, "ctx=4096"))
    status = ok(bm("--json", "status"))
    assert json.loads(status.out)["running"] is False
    assert "is not a regular file" in status.out + status.err
