"""The last step of a command that must either happen whole or not at all, and say which.

``tune`` searches for minutes, then records. A Ctrl-C during the search must record nothing;
one that lands while it records must not interrupt the record halfway nor report "cancelled"
for a change that was made. :func:`committing` checks for a cancellation first (so a Ctrl-C
before it still cancels), then runs its block with anyio's cancellation shielded and Ctrl-C
held (asyncio's runner cancels the main task natively on SIGINT, which no shield stops), and
tells the caller whether one came meanwhile.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from types import FrameType

import anyio
import anyio.lowlevel

__all__ = ["Held", "committing"]


@dataclass
class Held:
    """How many Ctrl-C the block held back."""

    interrupts: int = 0


@asynccontextmanager
async def committing() -> AsyncIterator[Held]:
    """Raise the pending cancellation if any; else run the block to its end, whatever comes."""
    held = Held()
    swap = threading.current_thread() is threading.main_thread()
    previous = signal.getsignal(signal.SIGINT) if swap else None

    def hold(signum: int, frame: FrameType | None) -> None:
        held.interrupts += 1

    if swap:  # first, so that no Ctrl-C falls between the check and the block
        signal.signal(signal.SIGINT, hold)
    try:
        await anyio.lowlevel.checkpoint()  # a cancellation until now: nothing happens
        with anyio.CancelScope(shield=True):
            yield held
    finally:
        if swap:
            signal.signal(signal.SIGINT, previous)
