"""The read that explains: ``which`` (what a target resolves to, and why); ``config`` has its
own module (:mod:`.config`)."""

from __future__ import annotations

from dataclasses import dataclass

from ..results import Result

__all__ = ["WhichResult"]


@dataclass(kw_only=True, repr=False, eq=False)
class WhichResult(Result):
    """``which``: what the target is, the row and executable it runs, and why."""

    target: str
    type: str
    row: str | None
    path: str | None
    exists: bool
    reason: str
    notes: list[str]
