"""The lock file: ``lock``, ``sync`` and ``fetch``."""

from __future__ import annotations

from dataclasses import dataclass

from ..results import Outcome

__all__ = ["FetchResult", "LockResult", "SyncResult"]


@dataclass(kw_only=True, repr=False, eq=False)
class FetchResult(Outcome):
    dir: str
    fetched: list[str]
    present: list[str]


@dataclass(kw_only=True, repr=False, eq=False)
class LockResult(Outcome):
    path: str
    builds: list[str]
    activated: dict[str, str]
    fetch: FetchResult | None = None


@dataclass(kw_only=True, repr=False, eq=False)
class SyncResult(Outcome):
    lock: str
    install: list[str]
    reinstall: list[str]
    activate: list[str]
    remove: list[str]
    kept: list[str]
    dry_run: bool
    failed: dict[str, str] | None = None
