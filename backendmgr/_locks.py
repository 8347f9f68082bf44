"""Holding a file lock from async code.

filelock keeps its state per thread, so a lock must be taken and released by the same thread:
we poll from the event loop instead of blocking a worker thread, which also lets Ctrl-C
cancel a wait.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import anyio
from filelock import FileLock, Timeout

__all__ = ["hold"]


@contextlib.asynccontextmanager
async def hold(lock: FileLock, *, poll: float = 0.05) -> AsyncIterator[None]:
    while True:
        try:
            lock.acquire(timeout=0)
            break
        except Timeout:
            await anyio.sleep(poll)
    try:
        yield
    finally:
        lock.release()
