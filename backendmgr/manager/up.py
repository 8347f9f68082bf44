"""``up`` as one operation: claim this home's ``up`` lock, prepare the build and a current
config, run llama-swap until stopped, let go of the lock (issue 21).

The front end says what it hears (notes, warnings, llama-swap's lines) and when to stop:
``watch`` is started once everything is prepared and sets the event it is given (the CLI's
signal handler); it is cancelled when llama-swap has stopped.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

import anyio

from ..immutable import frozen

if TYPE_CHECKING:
    from ..run_requests import UpRequest
    from .swap import Prepared, SwapService

__all__ = ["Up", "UpListeners", "Watch"]

Watch = Callable[..., Coroutine[Any, Any, Any]]
"""``watch(stop, *, task_status)``: started in a task group once ``up`` is prepared."""


@frozen
class UpListeners:
    """What the front end hears while ``up`` runs, and what tells it to stop.
    ``adopt_orphans``: this process runs nothing else (the CLI's ``up``), so the servers of a
    llama-swap that dies are handed to it and stopped."""

    on_note: Callable[[str], None]
    on_warning: Callable[[str], None]
    on_line: Callable[[str], None]
    on_ready: Callable[[str], None]
    watch: Watch
    adopt_orphans: bool = False
    on_stopped: Callable[[Prepared], None] | None = None  # said while the lock is still held


@frozen
class Up:
    swap: SwapService

    async def run(self, req: UpRequest, heard: UpListeners) -> Prepared:
        """Serve until ``heard.watch`` sets its event; the prepared run (its config) when
        stopped."""
        notes, release = await self.swap.claim(replace=req.replace)
        try:  # the lock is held until llama-swap and its servers are stopped
            for note in notes:
                heard.on_note(note)
            prepared = await self.swap.prepare(req.listen, public=req.public)
            for warning in prepared.warnings:
                heard.on_warning(warning)
            stop = anyio.Event()
            async with anyio.create_task_group() as tg:
                await tg.start(heard.watch, stop)
                try:
                    await self.swap.up(
                        prepared,
                        on_line=heard.on_line,
                        on_ready=heard.on_ready,
                        stop=stop,
                        adopt_orphans=heard.adopt_orphans,
                    )
                finally:
                    tg.cancel_scope.cancel()
            if heard.on_stopped is not None:
                heard.on_stopped(prepared)
            return prepared
        finally:
            release()
