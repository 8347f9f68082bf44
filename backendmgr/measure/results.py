"""What ``verify --repair``, ``tune`` and ``bench`` return (CLI ``--json`` and the Python API).

Each model's result is a record; the reports around them are mutations' :class:`Outcome`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..immutable import frozen
from ..record import Record
from ..results import Outcome
from .reasons import FailureCause, cause_text

__all__ = [
    "Attempt",
    "BenchReport",
    "BenchResult",
    "RepairReport",
    "RepairResult",
    "TuneReport",
    "TuneResult",
    "TuneTrial",
]


@frozen(kw_only=True)
class Attempt(Record):
    """One build tried for a model: whether it served, and why not."""

    backend: str | None
    ok: bool
    reason: str | None = None
    cause: FailureCause | None = None
    why: str | None = None  # why repair tried this build when it did (issue 29)

    def line(self) -> str:
        if self.ok:
            return f"{self.backend}: ok"
        return f"{self.backend}: {self.reason}" + cause_text(self.cause)


@frozen(kw_only=True)
class RepairResult(Record):
    id: str
    ok: bool  # it serves now (or would, for a dry run)
    pinned: str | None = None  # the row it was (or would be) pinned to
    why: str | None = None  # why that row was preferred (the activated build, …)
    tried: list[Attempt] = field(default_factory=list)  # the resolved build first
    message: str


@dataclass(kw_only=True, repr=False, eq=False)
class RepairReport(Outcome):
    dry_run: bool = False
    results: list[RepairResult] = field(default_factory=list)
    failed: int = 0


@frozen(kw_only=True)
class TuneTrial(Record):
    ctx: int
    ok: bool  # started, and measured within the budget
    started: bool
    gib: float | None = None
    reason: str | None = None
    cause: str | None = None


@frozen(kw_only=True)
class TuneResult(Record):
    id: str
    ok: bool
    ctx: int | None  # the largest context that fits; None when none does
    estimated_ctx: int | None  # what the emitter chose before
    measured_gib: float | None
    measured_by: str | None
    budget_gib: float
    backend: str | None
    device: str
    trials: list[TuneTrial] = field(default_factory=list)
    stopped: str | None = None
    cause: FailureCause | None = None  # what ended the search, when not memory, and its fix
    message: str


@dataclass(kw_only=True, repr=False, eq=False)
class TuneReport(Outcome):
    results: list[TuneResult] = field(default_factory=list)
    failed: int = 0


@frozen(kw_only=True)
class BenchResult(Record):
    """One model on one build: the medians and spreads of its runs, or why there are none."""

    model: str
    build: str | None
    device: str
    ok: bool
    prompt_per_second: float | None = None
    predicted_per_second: float | None = None
    prompt_spread: float | None = None  # (max - min) / median, percent
    predicted_spread: float | None = None
    runs: int = 0
    prompt_words: int
    prompt_tokens: int | None = None
    predicted_tokens: int | None = None
    measured_by: str | None = None
    argv: list[str] = field(default_factory=list)  # the command line, before ${PORT}
    reason: str | None = None
    cause: FailureCause | None = None
    message: str


@dataclass(kw_only=True, repr=False, eq=False)
class BenchReport(Outcome):
    results: list[BenchResult] = field(default_factory=list)
    failed: int = 0
