"""Holding a file lock from async code.

filelock keeps its state per thread, so a lock must be taken and released by the same thread:
we poll from the event loop instead of blocking a worker thread, which also lets Ctrl-C
cancel a wait (an edit run with no loop polls in its own thread: :mod:`._inline`). The holder
writes its pid beside the lock so a waiter can say whom it waits for.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TYPE_CHECKING

from ._inline import sleep

if TYPE_CHECKING:
    from filelock import FileLock

__all__ = ["hold", "holder_pid"]


def _pid_file(lock: FileLock) -> Path:
    return Path(f"{lock.lock_file}.pid")


def holder_pid(lock: FileLock) -> int | None:
    """The pid the current holder wrote, if it is readable and sane (the file is advisory)."""
    from ._fs import read_regular

    try:  # a link or a FIFO in its place is no note: never followed, never waited on
        text = read_regular(_pid_file(lock), 20, follow=False)[:20].decode("ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return int(text) if text.isdigit() and 0 < int(text) < 2**22 else None


@contextlib.asynccontextmanager
async def hold(
    lock: FileLock,
    *,
    poll: float = 0.05,
    on_wait: Callable[[int | None], None] | None = None,
) -> AsyncIterator[bool]:
    """Hold ``lock``; yields whether another process held it first (we had to wait)."""
    from filelock import Timeout  # loaded by whoever made ``lock``: a read never does

    waited = False
    while True:
        try:
            lock.acquire(timeout=0)
            break
        except Timeout:
            if not waited and on_wait is not None:
                on_wait(holder_pid(lock))
            waited = True
            await sleep(poll)
    from ._fs import create_anew

    with contextlib.suppress(OSError):  # only the holder writes it; a stranger there is gone
        create_anew(_pid_file(lock), f"{os.getpid()}\n".encode("ascii"))
    try:
        yield waited
    finally:
        lock.release()
