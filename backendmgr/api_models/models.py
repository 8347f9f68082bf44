"""The models: ``models`` (each with its backend and last verification) and one model's
``verify`` run; ``cmd`` has its own module (:mod:`.cmd`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any

# imported at run time, not only for mypy: pydantic resolves it for the OpenAPI schemas
from ..measure.cause import FailureCause, cause_text
from ..record import After, instant
from ..results import Result

__all__ = ["ModelBackend", "ModelInfo", "VerifyResult"]


@dataclass(kw_only=True, repr=False, eq=False)
class ModelBackend(Result):
    """The row a model resolves to, and why (``models``' backend column)."""

    id: str | None
    kind: str
    path: str | None
    reason: str


@dataclass(kw_only=True, repr=False, eq=False)
class VerifyResult(Result):
    """One model's run: whether it served, why not, how long it took and what it used."""

    id: str
    ok: bool
    reason: str | None
    ready_s: float | None
    gpu_gib: float | None
    est_vram_gb: float | None
    backend: str | None = None
    verified_at: Annotated[str | None, After(instant)] = None  # as verify writes it
    device: str | None = None  # the GPU(s) the build said it loaded onto
    cause: FailureCause | None = None  # the recognised cause of a failure (issue 22)
    budget_gb: float | None = None  # what the model was sized for (issue 20)
    over_budget: str | None = None  # "more than the 16 GiB of vram_budget_gb", when it used more

    def line(self) -> str:
        """``qwen3: ok in 0.2 s, 6.31 GiB used, 6.37 GiB estimated`` or ``qwen3: failed: …``:
        the CLI prints it, and the page's job events carry it."""
        if not self.ok:
            return f"{self.id}: failed: {self.reason}" + cause_text(self.cause)
        parts = [f"ok in {self.ready_s or 0:.1f} s"]
        if self.gpu_gib is not None:
            parts.append(f"{self.gpu_gib:.2f} GiB used")
        if self.over_budget:
            parts.append(self.over_budget)
        if self.est_vram_gb is not None:
            parts.append(f"{self.est_vram_gb:.2f} GiB estimated")
        if self.device:
            parts.append(f"on {self.device}")
        return f"{self.id}: " + ", ".join(parts)


@dataclass(kw_only=True, repr=False, eq=False)
class ModelInfo(Result):
    """One discovered model as ``models`` shows it: its file, its plan and what was measured."""

    id: str
    path: str
    format: str
    class_: str | None = field(metadata={"alias": "class"})
    role: str | None
    size_gb: float | None
    backend: ModelBackend | None
    skipped: str | None
    notes: list[str]
    est_vram_gb: float | None = None
    verified: VerifyResult | None = None  # the last `verify` result for this exact command
    verification: str | None = None  # "verified today: ok in 1.0 s, 6.31 GiB" / "not verified"
    tuning: str | None = None  # "ctx 16384 from tuning: …" (issue 33: one sentence)
    bench: list[dict[str, Any]] | None = None  # issue 32: the last `bench` figures per build
