"""Starting a child in its own process group, so that stopping it reaches the helpers it
starts (a model server's workers, a build backend's compilers, llama-swap's servers)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence

import anyio
from anyio.abc import Process

__all__ = ["cannot_start", "open_group"]


async def open_group(
    argv: Sequence[str], *, env: Mapping[str, str] | None = None, merge: bool = True
) -> Process:
    """Start ``argv`` with no stdin and its output piped (stderr joins stdout when ``merge``),
    leading a new session on POSIX. Shielded: a cancel between the start and the caller's
    ``try`` would leave a started group unowned. Raises :class:`OSError` when it cannot start."""
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
