"""Install and update jobs: each runs the Manager's ``install`` (or ``update``) as a task; its
events are kept for the page's progress stream, and cancelling the task is Ctrl-C's cancel."""

from __future__ import annotations

import asyncio
import itertools
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from ..api_models import dump
from ..boundary import failure_of
from ..errors import Refused, escaped
from ..events import JobEvent, ProgressEvent

if TYPE_CHECKING:
    from ..results import Result

__all__ = ["Job", "Jobs", "error_body", "one_line"]

State = Literal["running", "done", "failed", "cancelled"]
MAX_EVENTS = 500  # a job's kept events; progress ticks replace each other, so few are needed
MAX_FINISHED = 100  # finished jobs kept for the page to look at
MAX_RUNNING = 8  # jobs at once: each holds downloads, a child process or a lock
CLOSE_WAIT_S = 10.0  # how long stopping the server waits for jobs to clean up

OnEvent = Callable[[JobEvent], None]


def one_line(message: str) -> str:
    """The message as one line wherever the page or a log shows it (:func:`escaped`)."""
    return escaped(message)


def error_body(exc: BaseException) -> tuple[int, dict[str, Any]]:
    """The HTTP status and ``{"error", "exit"}`` body for an error, in the CLI's words."""
    failure = failure_of(exc)
    return failure.http_status, failure.body()


@dataclass(eq=False, repr=False)
class Job:
    """One install: its request, its events in order, and how it ended."""

    id: str
    kind: str
    request: dict[str, Any]
    state: State = "running"
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    started: float = field(default_factory=time.monotonic)
    # (sequence number, event); a progress tick that follows one of the same phase and asset
    # replaces it under a new number, so a slow reader gets the latest, not every tick
    events: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    task: asyncio.Task[None] | None = None
    _seq: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    _changed: asyncio.Event = field(default_factory=asyncio.Event)

    def add(self, data: dict[str, Any]) -> None:
        seq = next(self._seq)
        last = self.events[-1][1] if self.events else None
        tick = not data["message"] and data["phase"] == "downloading"
        if (
            last is not None
            and tick
            and not last["message"]
            and (last["phase"], last["asset"]) == (data["phase"], data["asset"])
        ):
            self.events[-1] = (seq, data)
        elif len(self.events) < MAX_EVENTS or data["phase"] in ("done", "failed", "cancelled"):
            self.events.append((seq, data))
        self._wake()

    def _wake(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    def summary(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "request": self.request,
            "state": self.state,
            "events": len(self.events),
            "last": self.events[-1][1] if self.events else None,
            "result": self.result,
            "error": self.error,
        }

    async def stream(self, after: int = 0) -> AsyncIterator[tuple[int, dict[str, Any]]]:
        """Every event after sequence number ``after``, as they come, until the job ends."""
        while True:
            changed = self._changed
            fresh = [(seq, data) for seq, data in self.events if seq > after]
            for seq, data in fresh:
                after = seq
                yield seq, data
            if self.state != "running" and not [s for s, _ in self.events if s > after]:
                return
            await changed.wait()


class Jobs:
    """The server's jobs. Several run at once; the file locks order them against each other
    and against a CLI on the same data home."""

    def __init__(self) -> None:
        self._jobs: dict[str, Job] = {}

    def get(self, job_id: str) -> Job | None:
        return self._jobs.get(job_id)

    def all(self) -> list[Job]:
        return list(self._jobs.values())

    def running(self) -> int:
        return sum(1 for j in self._jobs.values() if j.state == "running")

    def start(
        self,
        kind: str,
        request: dict[str, Any],
        run: Callable[[OnEvent], Awaitable[Result]],
        *,
        message: Callable[[Result], str] | None = None,
    ) -> Job:
        """Start ``run(on_event)`` as a task and return its job at once; its typed outcome
        becomes the job's result, dumped as the CLI's ``--json`` dumps it. ``message`` says
        the result in a line when it has no ``message`` of its own. Refused beyond
        ``MAX_RUNNING`` jobs at once."""
        self._forget_old()
        if self.running() >= MAX_RUNNING:
            raise Refused(
                f"{MAX_RUNNING} jobs are running already; wait for one to finish or cancel one"
            )
        job = Job(id=secrets.token_hex(8), kind=kind, request=request)

        def on_event(event: JobEvent) -> None:
            """A progress event, or verify's result for one model."""
            data = event.as_json()
            if data["phase"] in ("done", "failed"):
                return  # sent below, with the result or the error's body
            job.add(data)

        async def body() -> None:
            from ..changes import collecting
            from ..results import Outcome

            try:
                with collecting() as record:  # what it wrote, as the CLI says it (issue 33)
                    outcome = await run(on_event)
                wrote = record.document()
                if isinstance(outcome, Outcome) and outcome.changes is None and wrote:
                    outcome.changes = wrote
            except asyncio.CancelledError:
                job.state = "cancelled"
                job.error = {"error": "cancelled", "exit": 130}
                if not job.events or job.events[-1][1]["phase"] != "cancelled":
                    job.add(ProgressEvent("cancelled").as_json())
                raise
            except Exception as exc:
                _, body = error_body(exc)
                job.state, job.error = "failed", body
                job.add({**ProgressEvent("failed", message=body["error"]).as_json(), **body})
                return
            job.result = dump(outcome)
            job.state = "done"
            said = message(outcome) if message else str(getattr(outcome, "message", ""))
            job.add({**ProgressEvent("done", message=said).as_json(), **job.result})

        job.task = asyncio.get_running_loop().create_task(body(), name=f"{kind} {job.id}")
        job.task.add_done_callback(_quiet)
        self._jobs[job.id] = job
        return job

    def cancel(self, job: Job) -> bool:
        """Cancel a running job (the Manager cleans up as for Ctrl-C); False when it ended."""
        if job.task is None or job.task.done():
            return False
        job.task.cancel()
        return True

    async def close(self, wait: float = CLOSE_WAIT_S) -> None:
        """Cancel every running job and wait up to ``wait`` seconds for them to clean up
        (a job stuck in a system call must not keep the server from stopping)."""
        running = [j.task for j in self._jobs.values() if j.task and not j.task.done()]
        for task in running:
            task.cancel()
        if not running:
            return
        _, pending = await asyncio.wait(running, timeout=wait)
        if pending:
            import sys

            print(
                f"warning: {len(pending)} job(s) still cleaning up after {wait:g} s; "
                "stopping anyway (doctor --fix tidies what they leave)",
                file=sys.stderr,
                flush=True,
            )

    def _forget_old(self) -> None:
        done = [j for j in self._jobs.values() if j.state != "running"]
        for job in done[: max(0, len(done) - MAX_FINISHED)]:
            del self._jobs[job.id]


def _quiet(task: asyncio.Task[None]) -> None:
    """Retrieve a job task's outcome so asyncio does not log a cancelled one."""
    if not task.cancelled():
        task.exception()
