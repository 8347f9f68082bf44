"""Starting a child in its own process group, so that stopping it reaches the helpers it
starts (a model server's workers, a build backend's compilers, llama-swap's servers)."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import anyio
from anyio.abc import Process

__all__ = ["cannot_start", "open_group"]


def dying_with_parent(argv: Sequence[str]) -> list[str]:
    """``argv`` started so that it gets SIGTERM when this process dies, even by SIGKILL
    (Linux's parent-death signal, set by ``_child_shim.py`` before it becomes the program;
    elsewhere ``argv`` unchanged). Raises :class:`OSError` for a program that is not there,
    as a plain start would."""
    if not sys.platform.startswith("linux"):
        return list(argv)
    exe = shutil.which(argv[0])
    if exe is None:
        code = errno.EACCES if os.path.isfile(argv[0]) else errno.ENOENT
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
    ``try`` would leave a started group unowned. ``die_with_parent``: see
    :func:`dying_with_parent`. Raises :class:`OSError` when it cannot start."""
    if die_with_parent:
        argv = dying_with_parent(argv)
    with anyio.CancelScope(shield=True):
        process = await anyio.open_process(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT if merge else subprocess.PIPE,
            env=None if env is None else dict(env),
            start_new_session=os.name == "posix",
        )
    return process


def cannot_start(argv: Sequence[str], exc: OSError) -> str:
    """The one line for a program that did not start (missing, not executable, …)."""
    return f"cannot start {argv[0]}: {exc.strerror or exc}"
