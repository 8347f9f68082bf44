"""What only the HTTP API answers: a job's state and every error response."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..results import Result

__all__ = ["ErrorBody", "JobInfo"]


@dataclass(kw_only=True, repr=False, eq=False)
class ErrorBody(Result):
    """Every error response: the CLI's one-line message and the exit status it would give."""

    error: str
    exit: int


@dataclass(kw_only=True, repr=False, eq=False)
class JobInfo(Result):
    id: str
    kind: str
    request: dict[str, Any]
    state: str
    events: int
    result: dict[str, Any] | None = None
    error: ErrorBody | None = None
