"""Upkeep: ``update``, ``prune``, ``cache clean`` and ``doctor``."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..results import Outcome, Result

__all__ = ["CacheCleanResult", "DoctorReport", "PruneResult", "UpdateEntry", "UpdateResult"]


@dataclass(kw_only=True, repr=False, eq=False)
class DoctorReport(Result):
    ok: bool
    problems: list[str]
    notes: list[str]
    fixed: list[str]
    gpus: list[str] = field(default_factory=list)  # "GPU 0: NVIDIA …, 24.0 GiB (nvidia)"


@dataclass(kw_only=True, repr=False, eq=False)
class UpdateEntry(Result):
    component: str
    variant: str
    from_: str | None = field(metadata={"alias": "from"})
    to: str
    action: str


@dataclass(kw_only=True, repr=False, eq=False)
class UpdateResult(Outcome):
    updates: list[UpdateEntry]
    dry_run: bool


@dataclass(kw_only=True, repr=False, eq=False)
class PruneResult(Outcome):
    removed: list[str]
    freed_bytes: int
    dry_run: bool


@dataclass(kw_only=True, repr=False, eq=False)
class CacheCleanResult(Outcome):
    freed_bytes: int
    release_listings: list[str]
    partial_downloads: list[str]
    leftovers: list[str]
    skipped_partial_downloads: bool
    dry_run: bool
