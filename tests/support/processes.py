"""Child processes the tests start and must see gone: zombie-aware liveness, and a check that
none is left running (killing any that is, so the next test does not inherit it)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from pathlib import Path

from tests.support.wait import wait_until


def running(pid: int) -> bool:
    """True while ``pid`` runs; a zombie (killed, not yet reaped by init) does not count."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def assert_none_left(pids: list[int], within: float = 10.0) -> None:
    """Each of ``pids`` ends within ``within`` seconds; any left is killed, then reported."""
    with contextlib.suppress(AssertionError):
        wait_until(lambda: not any(running(p) for p in pids), "processes ended", timeout=within)
    left = [p for p in pids if running(p)]
    for pid in left:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    assert not left, f"processes {left} were left running"


def pids_in(path: Path) -> list[int]:
    """The pids that stand-in programs appended to ``path`` so far."""
    return [int(p) for p in path.read_text().split()] if path.exists() else []


def recorded_pids(
    path: Path,
    count: int = 1,
    *,
    timeout: float = 60,
    proc: subprocess.Popen[str] | None = None,
) -> list[int]:
    """The pids in ``path`` once ``count`` programs recorded theirs (failing at once if
    ``proc``, the backendmgr that starts them, ends first)."""

    def enough() -> list[int]:
        pids = pids_in(path)
        return pids if len(pids) >= count else []

    return wait_until(
        enough,
        f"{count} program(s) recorded their pid in {path}",
        timeout=timeout,
        proc=proc,
    )
