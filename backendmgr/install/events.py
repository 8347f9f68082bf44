"""Progress events of an install job (SPEC §7): the API emits them, the CLI draws them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

__all__ = ["EventSink", "Phase", "ProgressEvent"]

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
    about that download (``resuming … at 12.6 MiB of 42.0 MiB``), shown as a line of its own."""

    phase: Phase
    asset: str = ""
    bytes_done: int = 0
    bytes_total: int | None = None
    bytes_per_s: float = 0.0
    message: str = ""


EventSink = Callable[[ProgressEvent], None]
