"""Run a fresh build once before registering it (SPEC §7.5): a missing shared library or a
wrong instruction set shows up here, with the program's own words, not at model load time.

The program runs through :func:`~backendmgr.install.probe.run_in_group`: in its own process
group, output bounded, and the whole group stopped at the timeout, on a cancel or Ctrl-C, so a
build that hangs or leaves a child behind costs the timeout at most and leaves no process."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ..errors import InstallFailed
from .probe import run_in_group

__all__ = ["SmokeTimedOut", "smoke_check"]

TIMEOUT_S = 20.0
MAX_KEPT = 1 << 16


class SmokeTimedOut(InstallFailed):
    """The program did not finish within its bound: slow, not necessarily broken."""


def _tail(data: bytes, lines: int = 5) -> str:
    text = data.decode("utf-8", "replace").strip()
    return " | ".join(text.splitlines()[-lines:]) if text else "no output"


async def smoke_check(
    exe: Path, args: Sequence[str] = ("--version",), *, timeout: float | None = None
) -> str:
    """Return what the program printed (stdout, then stderr: llama-server writes its version
    line to stderr after its device lines); raise :class:`InstallFailed` otherwise.
    ``timeout`` defaults to :data:`TIMEOUT_S`, read at call time."""
    limit = TIMEOUT_S if timeout is None else timeout
    argv = [str(exe), *args]
    try:
        done = await run_in_group(
            argv, timeout=limit, limit=MAX_KEPT, merge=False, stop_when_full=False
        )
    except TimeoutError as exc:
        raise SmokeTimedOut(
            f"{exe.name} {' '.join(args)} did not finish within {limit:.0f} s; "
            "use --no-smoke to skip the check"
        ) from exc
    except OSError as exc:
        raise InstallFailed(
            f"{exe.name} cannot run here ({exc.strerror or exc}); "
            "use --no-smoke for a build meant for another machine"
        ) from exc
    if done.code != 0:
        raise InstallFailed(
            f"{exe.name} {' '.join(args)} failed with exit status {done.code}: "
            f"{_tail(done.err_tail or done.out_tail)}"
        )
    text = done.out + b"\n" + done.err
    return text[:MAX_KEPT].decode("utf-8", "replace").strip()
