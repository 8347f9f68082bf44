"""Progress events of a job (SPEC §7), part of the public contract: the Manager emits them,
the CLI draws them and the HTTP API streams them (:meth:`ProgressEvent.as_json`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Literal

from .immutable import frozen

if TYPE_CHECKING:
    from .api_models import VerifyResult

__all__ = ["EventSink", "JobEvent", "Phase", "ProgressEvent", "VerifiedEvent", "for_build"]

Phase = Literal[
    "resolving",
    "downloading",
    "verifying",
    "extracting",
    "committing",
    "registering",
    "done",
    "failed",
    "cancelled",
]


@frozen(slots=True)
class ProgressEvent:
    """One step of a job. A ``downloading`` event with both ``asset`` and ``message`` is a note
    about that download (``resuming … at 12.6 MiB of 42.0 MiB``), shown as a line of its own.
    ``build`` names the build when several install at once (``sync``)."""

    phase: Phase
    asset: str = ""
    bytes_done: int = 0
    bytes_total: int | None = None
    bytes_per_s: float = 0.0
    message: str = ""
    build: str = ""

    def as_json(self) -> dict[str, Any]:
        """The event as the API's stream sends it (SPEC §7's fields under short names)."""
        data: dict[str, Any] = {
            "phase": self.phase,
            "asset": self.asset,
            "bytes": self.bytes_done,
            "total": self.bytes_total,
            "rate": round(self.bytes_per_s, 1),
            "message": self.message,
        }
        if self.build:  # sync's concurrent installs: which build the step belongs to
            data["build"] = self.build
        return data


@frozen(slots=True)
class VerifiedEvent:
    """``verify``'s result for one model, as a job event: its one-line wording and the result."""

    result: VerifyResult
    phase: Literal["verified"] = "verified"

    def as_json(self) -> dict[str, Any]:
        from .api_models import dump

        said = ProgressEvent("verifying", asset=self.result.id, message=self.result.line())
        return {**said.as_json(), "phase": self.phase, "result": dump(self.result)}


JobEvent = ProgressEvent | VerifiedEvent
"""What a job's event stream carries: progress steps, and verify's per-model results."""

EventSink = Callable[[ProgressEvent], None]


def for_build(sink: EventSink | None, build: str) -> EventSink | None:
    """``sink``, its events naming ``build``: concurrent installs share one sink."""
    if sink is None:
        return None
    return lambda event: sink(replace(event, build=build))
