"""Await a condition instead of sleeping: poll until it holds, fail naming what did not happen.

Timeouts are generous (the suite runs beside other work on two cores) but bounded, and a
caller that waits on a child process passes it, so a child that died fails at once instead of
at the timeout."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio

T = TypeVar("T")


def wait_until(
    check: Callable[[], T],
    what: str,
    *,
    timeout: float = 30,
    interval: float = 0.02,
    proc: subprocess.Popen[str] | subprocess.Popen[bytes] | None = None,
) -> T:
    """``check()``'s first truthy value; an AssertionError saying ``what`` did not happen
    once ``timeout`` seconds pass (or ``proc`` ends first)."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"{what}: the process ended first (exit {proc.returncode})")
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout} s")
        time.sleep(interval)


async def await_until(
    check: Callable[[], T | Awaitable[T]],
    what: str,
    *,
    timeout: float = 30,
    interval: float = 0.02,
) -> T:
    """``wait_until`` inside an event loop (asyncio or trio, through anyio): the loop keeps
    running while it waits. ``check`` may be a coroutine function."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if isinstance(value, Awaitable):
            value = await value
        if value:
            return value  # type: ignore[return-value]
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout} s")
        await anyio.sleep(interval)
