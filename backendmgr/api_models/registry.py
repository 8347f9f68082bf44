"""The registry's rows: ``backends add/remove`` and ``default`` (the per-model overrides'
results are in :mod:`.overrides`: an edit of one model loads no row class)."""

from __future__ import annotations

from dataclasses import dataclass

from ..results import Outcome
from .inventory import BackendRowInfo

__all__ = ["BackendRowResult", "RemovedRow"]


@dataclass(kw_only=True, repr=False, eq=False)
class RemovedRow(Outcome):
    id: str
    removed: bool


@dataclass(kw_only=True, repr=False, eq=False)
class BackendRowResult(Outcome, BackendRowInfo):
    """``backends add`` and ``default``: the row as it now stands."""
