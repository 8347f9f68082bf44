"""The last step of a command that must either happen whole or not at all, and say which.

``tune`` searches for minutes, then records. A Ctrl-C during the search must record nothing;
one that lands while it records must not interrupt the record halfway nor report "cancelled"
for a change that was made. :func:`committing` checks for a cancellation first (so a Ctrl-C
before it still cancels), then runs its block with anyio's cancellation shielded and Ctrl-C
held (asyncio's runner cancels the main task natively on SIGINT, which no shield stops), and
tells the caller whether one came meanwhile.

A command-line process calls :func:`hold_to_exit` first: there a Ctrl-C after the block
would still end the run as "cancelled" (asyncio's runner turns it into a cancellation of the
finishing task), so after the block one Ctrl-C is ignored until the process exits, a few prints
later, and a second one ends it at once with a line that says the result stands.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from types import FrameType
from typing import Any, ClassVar

import anyio
import anyio.lowlevel

__all__ = ["Held", "committing", "hold_to_exit", "undoing"]


@dataclass(repr=False, eq=False)
class Held:
    """How many Ctrl-C the block held back."""

    interrupts: int = 0


class _Policy:
    to_exit = False  # set by hold_to_exit: a command-line process


def hold_to_exit() -> None:
    """In this process, once a :func:`committing` block starts, Ctrl-C stays held until the
    process exits (for the command line, whose runner would call a late one "cancelled")."""
    _Policy.to_exit = True


class _Holding:
    """The blocks holding Ctrl-C now. Several may overlap in one process (the page's jobs each
    stop their servers): the first saves the handler and the last puts it back, whatever the
    order they end in (each putting back what it found would leave a stale one installed)."""

    blocks: ClassVar[list[Held]] = []
    saved: ClassVar[Any] = None


def _count(signum: int, frame: FrameType | None) -> None:
    for held in _Holding.blocks:
        held.interrupts += 1


def _hold(held: Held) -> bool:
    """From now on, count Ctrl-C in ``held`` instead of acting on it; False where it cannot
    (off the main thread, where no signal arrives, or a handler not set from Python)."""
    if threading.current_thread() is not threading.main_thread():
        return False
    if not _Holding.blocks:
        previous = signal.getsignal(signal.SIGINT)
        if previous is None:
            return False
        _Holding.saved = previous
        signal.signal(signal.SIGINT, _count)
    _Holding.blocks.append(held)
    return True


def _release(held: Held, then: Any = None) -> None:
    """Stop counting in ``held``; the last block out puts the saved handler back (or ``then``)."""
    _Holding.blocks.remove(held)
    if not _Holding.blocks:
        signal.signal(signal.SIGINT, then or _Holding.saved)
        _Holding.saved = None


@asynccontextmanager
async def committing() -> AsyncIterator[Held]:
    """Raise the pending cancellation if any; else run the block to its end, whatever comes."""
    held = Held()
    holding = _hold(held)  # first, so that no Ctrl-C falls between the check and the block
    entered = False
    try:
        await anyio.lowlevel.checkpoint()  # a cancellation until now: nothing happens
        entered = True
        with anyio.CancelScope(shield=True):
            yield held
    finally:
        if holding:
            _release(held, _after_commit(held) if entered and _Policy.to_exit else None)


@asynccontextmanager
async def undoing() -> AsyncIterator[Held]:
    """An undo that must run whole, even in the ``finally`` of a run being cancelled (a
    canary's temporary pins, a bisect's installs, a started server's stop): shielded, with
    Ctrl-C held meanwhile. Shielding alone is not enough: the first Ctrl-C cancels the run,
    and asyncio's runner raises ``KeyboardInterrupt`` at the second, wherever the undo is.
    No checkpoint first (unlike :func:`committing`): the run may be cancelled already."""
    held = Held()
    holding = _hold(held)
    try:
        with anyio.CancelScope(shield=True):
            yield held
    finally:
        if holding:
            _release(held)


def _after_commit(held: Held) -> Callable[[int, FrameType | None], None]:
    """The command line's Ctrl-C once its change is made: the first is noted, the second ends
    the process now (nothing is left to undo), saying so."""
    first = held.interrupts

    def handler(signum: int, frame: FrameType | None) -> None:
        held.interrupts += 1
        if held.interrupts - first >= 2:
            os.write(2, b"error: interrupted after the result was recorded; it stands\n")
            os._exit(130)

    return handler
