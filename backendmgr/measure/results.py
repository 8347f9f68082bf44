"""What ``verify --repair`` and ``tune`` return (CLI ``--json`` and the Python API)."""

from __future__ import annotations

from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict, Field

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


class _Doc(BaseModel):
    model_config = ConfigDict(defer_build=True, extra="allow", populate_by_name=True)


class Attempt(_Doc):
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


class RepairResult(_Doc):
    id: str
    ok: bool  # it serves now (or would, for a dry run)
    pinned: str | None = None  # the row it was (or would be) pinned to
    why: str | None = None  # why that row was preferred (the activated build, …)
    tried: list[Attempt] = Field(default_factory=list)  # the resolved build first
    message: str


@dataclass(kw_only=True)
class RepairReport(Outcome):
    dry_run: bool = False
    results: list[RepairResult] = field(default_factory=list)
    failed: int = 0


class TuneTrial(_Doc):
    ctx: int
    ok: bool  # started, and measured within the budget
    started: bool
    gib: float | None = None
    reason: str | None = None
    cause: str | None = None


class TuneResult(_Doc):
    id: str
    ok: bool
    ctx: int | None  # the largest context that fits; None when none does
    estimated_ctx: int | None  # what the emitter chose before
    measured_gib: float | None
    measured_by: str | None
    budget_gib: float
    backend: str | None
    device: str
    trials: list[TuneTrial] = Field(default_factory=list)
    stopped: str | None = None
    cause: FailureCause | None = None  # what ended the search, when not memory, and its fix
    message: str


@dataclass(kw_only=True)
class TuneReport(Outcome):
    results: list[TuneResult] = field(default_factory=list)
    failed: int = 0


class BenchResult(_Doc):
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
    argv: list[str] = Field(default_factory=list)  # the command line, before ${PORT}
    reason: str | None = None
    cause: FailureCause | None = None
    message: str


@dataclass(kw_only=True)
class BenchReport(Outcome):
    results: list[BenchResult] = field(default_factory=list)
    failed: int = 0
