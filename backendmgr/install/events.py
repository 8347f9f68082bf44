"""Progress events of an install job (SPEC §7): the API emits them, the CLI draws them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Literal

__all__ = ["EventSink", "Phase", "ProgressEvent", "for_build"]

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


@dataclass(frozen=True, slots=True)
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


EventSink = Callable[[ProgressEvent], None]


def for_build(sink: EventSink | None, build: str) -> EventSink | None:
    """``sink``, its events naming ``build``: concurrent installs share one sink."""
    if sink is None:
        return None
    return lambda event: sink(replace(event, build=build))
