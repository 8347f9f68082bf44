"""The smoke check runs a build's executable we do not trust: one that hangs and leaves a child
behind must cost at most the timeout, a cancel or Ctrl-C must take effect at once, and neither
may leave a process running (SPEC §7.5)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

from backendmgr.events import ProgressEvent
from backendmgr.install import smoke
from backendmgr.mirror import MirrorServer
from tests.conftest import CliResult
from tests.manager.test_async_api import (
    Setup,
    assert_old_state,
    assert_one_terminal,
    big_release,
    generated,
    phases,
)
from tests.support import tree, user_setup

Cli = Callable[..., CliResult]


def hanging_server(pids: Path, *, ignore_term: bool = False) -> bytes:
    """A llama-server that records its pid, starts a child that records its own, and hangs:
    the child sits in the foreground, so only a kill of the whole group reaches it. With
    ``ignore_term`` both ignore SIGTERM, so only SIGKILL ends them."""
    return (
        "#!/bin/sh\n" + ("trap '' TERM\n" if ignore_term else "") + f'echo "$$" >> "{pids}"\n'
        f'sh -c \'echo "$$" >> "{pids}"; exec sleep 300\'\n'
        'echo "version: 100 (b100)"\n'
    ).encode()


def recorded(pids: Path, count: int = 2, timeout: float = 20) -> list[int]:
    """The pids the program and its child wrote, once both have started."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = pids.read_text().split() if pids.exists() else []
        if len(found) >= count:
            return [int(p) for p in found]
        time.sleep(0.01)
    raise AssertionError(f"the smoke check did not start the program ({pids})")


def running(pid: int) -> bool:
    """True while ``pid`` runs; a zombie (killed, not yet reaped by init) does not count."""
    try:
        os.kill(pid, 0)
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (ProcessLookupError, FileNotFoundError):
        return False


def assert_none_left(pids: list[int], within: float = 2.0) -> None:
    deadline = time.monotonic() + within
    while any(running(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.02)
    left = [p for p in pids if running(p)]
    for pid in left:  # do not leave them to the next test either
        os.kill(pid, signal.SIGKILL)
    assert not left, f"the smoke check left processes {left} running"


def no_build(home: Path) -> None:
    folder = home / "builds" / "llama-server"
    assert not folder.exists() or [p for p in tree(folder) if not p.endswith(".lock")] == []


def test_a_hanging_build_with_a_child_fails_in_one_line_and_leaves_no_process(
    cli: Cli,
    mirror: MirrorServer,
    mirror_root: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(smoke, "TIMEOUT_S", 1.0)
    pids = tmp_path / "pids"
    big_release(mirror_root, script=hanging_server(pids))
    started = time.monotonic()
    result = cli("install", "llama-server")
    took = time.monotonic() - started
    assert result.code != 0, result
    assert "Traceback" not in result.err
    assert [line for line in result.err.splitlines() if "error" in line] == [
        "error: llama-server --version did not finish within 1 s; use --no-smoke to skip the check"
    ], result.err
    assert result.err.rstrip().splitlines()[-1].startswith("error: "), result.err
    assert took < 15, took
    assert_none_left(recorded(pids))
    no_build(tmp_path / "home")


@pytest.fixture
def state(tmp_path: Path, config_path: Path, monkeypatch: pytest.MonkeyPatch) -> Setup:
    monkeypatch.setenv("BACKENDMGR_VRAM_GB", "24")
    models, manual = user_setup(tmp_path, config_path)
    home = tmp_path / "home"
    return Setup(home, config_path, home / "llama-swap.yaml", models, manual)


@pytest.mark.asyncio
@pytest.mark.parametrize("ignore_term", [False, True])
async def test_cancel_during_the_smoke_check_is_prompt_and_stops_the_whole_group(
    mirror: MirrorServer, mirror_root: Path, state: Setup, tmp_path: Path, ignore_term: bool
) -> None:
    pids = tmp_path / "pids"
    big_release(mirror_root, script=hanging_server(pids, ignore_term=ignore_term))
    mgr = await generated(state)
    before = state.snapshot()
    events: list[ProgressEvent] = []
    async with anyio.create_task_group() as tg:

        async def install() -> None:
            await mgr.install("llama-server", "b100", on_event=events.append)

        tg.start_soon(install)
        found = await anyio.to_thread.run_sync(recorded, pids)
        cancelled_at = time.monotonic()
        tg.cancel_scope.cancel()
    assert time.monotonic() - cancelled_at < 3
    assert phases(events)[-2:] == ["extracting", "cancelled"]
    assert_one_terminal(events, "cancelled")
    assert_none_left(found)
    await assert_old_state(mgr, state, before)  # only the resumable download may stay


def test_ctrl_c_during_the_smoke_check_exits_130_and_leaves_no_process(
    mirror: MirrorServer, mirror_root: Path, tmp_path: Path, config_path: Path
) -> None:
    pids = tmp_path / "pids"
    big_release(mirror_root, script=hanging_server(pids))
    proc = subprocess.Popen(
        [sys.executable, "-m", "backendmgr", "install", "llama-server"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        found = recorded(pids)
        started = time.monotonic()
        proc.send_signal(signal.SIGINT)  # to the CLI alone, as a terminal's Ctrl-C reaches it
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert time.monotonic() - started < 3
    assert "Traceback" not in err and err.rstrip().splitlines()[-1] == "error: cancelled"
    assert_none_left(found)
    no_build(tmp_path / "home")
    assert not config_path.exists()


@pytest.mark.parametrize("step", ["installer", "tool-parser probe"])
def test_a_cancelled_venv_step_stops_its_whole_group(tmp_path: Path, step: str) -> None:
    """pip (or uv) and the tool-parser probe run in their own group too: a cancel while a
    build backend's helper hangs stops both at once."""
    from backendmgr.install import venv_job

    pids = tmp_path / "pids"
    argv = ["sh", "-c", hanging_server(pids).decode().split("\n", 1)[1]]

    async def main() -> float:
        started = time.monotonic()
        with anyio.move_on_after(1):
            if step == "installer":
                await venv_job._run(argv, None, dict(os.environ), "pip install")
            else:
                await venv_job._bounded_output(argv, 1 << 20)
        return time.monotonic() - started

    took = anyio.run(main)
    assert took < 3, took
    assert_none_left(recorded(pids))
