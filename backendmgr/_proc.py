"""Starting a child in its own process group, so that stopping it reaches the helpers it
starts (a model server's workers, a build backend's compilers, llama-swap's servers), and
stopping that group."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import anyio
from anyio.abc import Process

__all__ = ["KILL_GRACE_S", "cannot_start", "open_group", "stop_group"]

KILL_GRACE_S = 1.0
"""How long a program has between SIGTERM and SIGKILL: a cancel takes effect within this."""


def dying_with_parent(argv: Sequence[str]) -> list[str]:
    """``argv`` started so that it gets SIGTERM when this process dies, even by SIGKILL
    (Linux's parent-death signal, set by ``_child_shim.py`` before it becomes the program;
    elsewhere ``argv`` unchanged). Raises :class:`OSError` for a program that is not there,
    as a plain start would."""
    if not sys.platform.startswith("linux"):
        return list(argv)
    exe = shutil.which(argv[0])
    if exe is None:
        # what exec says: a path to something there (a file, a folder, a FIFO) cannot be run;
        # a bare name is looked up on PATH only, and a dangling link leads nowhere
        there = "/" in argv[0] and os.path.exists(argv[0])
        code = errno.EACCES if there else errno.ENOENT
        raise OSError(code, os.strerror(code), argv[0])
    shim = Path(__file__).with_name("_child_shim.py")
    return [sys.executable, "-I", "-S", str(shim), str(os.getpid()), exe, *argv]


async def open_group(
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    merge: bool = True,
    die_with_parent: bool = False,
) -> Process:
    """Start ``argv`` with no stdin and its output piped (stderr joins stdout when ``merge``),
    leading a new session on POSIX. Shielded: a cancel between the start and the caller's
    ``try`` would leave a started group unowned (one that comes anyway stops the group, below).
    ``die_with_parent``: see
    :func:`dying_with_parent`. Raises :class:`OSError` when it cannot start."""
    if die_with_parent:
        argv = dying_with_parent(argv)
    # A cancel scope's shield does not hold off asyncio's own cancellation (its runner cancels
    # the main task on Ctrl-C). One that landed while asyncio connects the new process's pipes
    # made asyncio kill the program alone and then wait for its pipes to close, which a helper
    # the program had started kept open for ever: Ctrl-C hung the command. So the start runs as
    # a task of its own that no cancel reaches; if one came meanwhile, the started group is
    # stopped whole before the cancel goes on.
    starting = asyncio.ensure_future(
        anyio.open_process(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT if merge else subprocess.PIPE,
            env=None if env is None else dict(env),
            start_new_session=os.name == "posix",
        )
    )
    with anyio.CancelScope(shield=True):
        try:
            process = await asyncio.shield(starting)
        except asyncio.CancelledError:
            with contextlib.suppress(OSError):  # it did not start: nothing to stop
                await stop_group(await starting)
            raise
    return process


def _signal_group(pgid: int, sig: int) -> bool:
    """Send ``sig`` to the program's process group; False when the group is gone."""
    try:
        os.killpg(pgid, sig)
    except OSError:  # ESRCH: nobody left; EPERM: not ours to signal
        return False
    return True


async def stop_group(process: Process, grace: float = KILL_GRACE_S) -> None:
    """SIGTERM the whole group, give the program ``grace`` seconds to exit, then SIGKILL what
    is left of the group, and reap the program: shielded, so a cancel or Ctrl-C cannot leave
    its helpers running."""
    with anyio.CancelScope(shield=True):
        pgid = process.pid
        if os.name == "posix" and _signal_group(pgid, signal.SIGTERM):
            if process.returncode is None:
                with anyio.move_on_after(grace):
                    await process.wait()
            # helpers that ignore SIGTERM or outlive it; a probe has no state for them to save
            _signal_group(pgid, signal.SIGKILL)
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
        with anyio.move_on_after(5):
            await process.wait()
        await process.aclose()


def cannot_start(argv: Sequence[str], exc: OSError) -> str:
    """The one line for a program that did not start (missing, not executable, …)."""
    return f"cannot start {argv[0]}: {exc.strerror or exc}"
