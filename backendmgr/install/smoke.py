"""Run a fresh build once before registering it (SPEC §7.5): a missing shared library or a
wrong instruction set shows up here, with the program's own words, not at model load time."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path

import anyio

from ..errors import InstallFailed

__all__ = ["smoke_check"]

TIMEOUT_S = 20.0
MAX_KEPT = 1 << 16


def _tail(data: bytes, lines: int = 5) -> str:
    text = data.decode("utf-8", "replace").strip()
    return " | ".join(text.splitlines()[-lines:]) if text else "no output"


async def smoke_check(
    exe: Path, args: Sequence[str] = ("--version",), *, timeout: float = TIMEOUT_S
) -> str:
    """Return what the program printed (stdout, then stderr: llama-server writes its version
    line to stderr after its device lines); raise :class:`InstallFailed` otherwise."""
    argv = [str(exe), *args]
    try:
        with anyio.fail_after(timeout):
            done = await anyio.run_process(argv, check=False, stdin=subprocess.DEVNULL)
    except TimeoutError as exc:
        raise InstallFailed(
            f"{exe.name} {' '.join(args)} did not finish within {timeout:.0f} s; "
            "use --no-smoke to skip the check"
        ) from exc
    except OSError as exc:
        raise InstallFailed(
            f"{exe.name} cannot run here ({exc.strerror or exc}); "
            "use --no-smoke for a build meant for another machine"
        ) from exc
    if done.returncode != 0:
        raise InstallFailed(
            f"{exe.name} {' '.join(args)} failed with exit status {done.returncode}: "
            f"{_tail(done.stderr or done.stdout)}"
        )
    text = (done.stdout or b"") + b"\n" + (done.stderr or b"")
    return text[:MAX_KEPT].decode("utf-8", "replace").strip()
