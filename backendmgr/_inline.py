"""The async services driven without an event loop, where they never wait on one (issue 30).

An edit on the command line (``set``, ``pin``, ``generate`` …) while no llama-swap runs reads
and writes a few files: everything it awaits is a blocking call that the services hand to a
worker thread so that the web page's loop stays free. Starting asyncio and anyio for that costs
a fifth of such a command. :func:`run_inline` drives the same coroutine to its end in this
thread instead, and :func:`in_thread` (what the services await for a blocking call) then calls
the function directly. There is one service layer: the web API and the façade stay async.

A coroutine that would really wait (an HTTP request, a subprocess on the loop, a sleep) cannot
run inline: that is a bug of the caller's routing, stopped with :class:`WouldSuspend` at the
first such wait, never silently.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import Any, TypeVar, TypeVarTuple

from .errors import BackendmgrError

__all__ = ["WouldSuspend", "in_thread", "inline", "run_inline", "sleep"]

T = TypeVar("T")
Ts = TypeVarTuple("Ts")

_INLINE: ContextVar[bool] = ContextVar("backendmgr_inline", default=False)


class WouldSuspend(BackendmgrError, RuntimeError):
    """An inline run reached a real wait: the command should have run on the event loop (a
    bug, said in one line with what waited)."""


def inline() -> bool:
    """Whether this code runs under :func:`run_inline` (and not on a loop started inside it,
    as a capability probe's ``anyio.run`` is: that loop's tasks inherit the context)."""
    if not _INLINE.get():
        return False
    asyncio = sys.modules.get("asyncio")  # not loaded: no loop runs
    if asyncio is None:
        return True
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return True
    return False


def run_inline(awaitable: Awaitable[T]) -> T:
    """Run ``awaitable`` (a coroutine) to its end in this thread, with no event loop; it
    must never suspend."""
    steps = awaitable.__await__()
    token = _INLINE.set(True)
    try:
        try:
            waited = steps.send(None)
        except StopIteration as done:
            result: T = done.value
            return result
        except Exception as exc:
            if _loop_missing(exc):
                raise WouldSuspend(_said(awaitable, exc)) from exc
            raise
        with contextlib.suppress(RuntimeError):  # a ``finally`` that awaits again
            steps.close()
        raise WouldSuspend(_said(awaitable, f"it waited on {type(waited).__name__}"))
    finally:
        _INLINE.reset(token)


# what anyio (its own error, or sniffio's before anyio 4.11) raises for a call that needs a loop
_NO_LOOP = (("anyio", "NoEventLoopError"), ("sniffio", "AsyncLibraryNotFoundError"))


def _loop_missing(exc: Exception) -> bool:
    """Whether ``exc`` says a call needed a running event loop (the libraries are looked up
    only where loaded: an error of theirs implies they are)."""
    for module, name in _NO_LOOP:
        kind = getattr(sys.modules.get(module), name, None)
        if isinstance(kind, type) and isinstance(exc, kind):
            return True
    return isinstance(exc, RuntimeError) and str(exc) == "no running event loop"  # asyncio's


def _said(awaitable: Awaitable[Any], why: object) -> str:
    name = getattr(awaitable, "__qualname__", type(awaitable).__name__)
    return f"internal error: {name} needs an event loop but ran without one ({why})"


async def in_thread(fn: Callable[[*Ts], T], *args: *Ts) -> T:
    """``fn(*args)``, a blocking call: in a worker thread on a loop (which stays free), or
    right here when run inline (nothing else is waiting to run)."""
    if inline():
        return fn(*args)
    from anyio import to_thread

    return await to_thread.run_sync(fn, *args)


async def sleep(seconds: float) -> None:
    """A pause between polls: the loop's, or this thread's when run inline (a Ctrl-C still
    ends it)."""
    if inline():
        import time

        time.sleep(seconds)
        return
    import anyio

    await anyio.sleep(seconds)
