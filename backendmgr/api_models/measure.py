"""The measuring runs' reports: ``verify`` (every model), ``bisect`` and ``canary``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..results import Outcome, Result

# imported at run time, not only for mypy: pydantic resolves it for the OpenAPI schemas
from .models import VerifyResult

__all__ = ["BisectReport", "CanaryReport", "VerifyReport"]


@dataclass(kw_only=True, repr=False, eq=False)
class VerifyReport(Result):
    results: list[VerifyResult]
    failed: int
    # issue 20: the models a run that stops at its first failure did not reach
    unchecked: list[str] = field(default_factory=list)


@dataclass(kw_only=True, repr=False, eq=False)
class BisectReport(Outcome):
    """What ``bisect`` found: the first bad and last good release, every release measured,
    the builds it installed and removed, and the Markdown report."""

    model: str
    metric: str
    threshold: float
    first_bad: dict[str, Any]
    last_good: dict[str, Any]
    figures: list[dict[str, Any]] = field(default_factory=list)  # every release measured
    installs: list[str] = field(default_factory=list)  # builds installed for the search
    removed: list[str] = field(default_factory=list)
    releases: int  # how many releases the range holds
    report: str  # the Markdown


@dataclass(kw_only=True, repr=False, eq=False)
class CanaryReport(Outcome):
    """A canary switch: promoted or rolled back, with both builds' figures per canary."""

    promoted: bool
    build: str  # the new build
    previous: str  # the build the canaries ran on before
    tolerance: float  # percent
    models: list[str]
    comparison: list[dict[str, Any]] = field(default_factory=list)  # per canary: both figures
    verified: dict[str, bool] = field(default_factory=dict)
