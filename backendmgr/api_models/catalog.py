"""The catalog: ``components`` and ``releases``."""

from __future__ import annotations

from dataclasses import dataclass

from ..results import Result

__all__ = ["CatalogEntry", "ReleaseInfo", "VariantHere"]


@dataclass(kw_only=True, repr=False, eq=False)
class VariantHere(Result):
    id: str
    available: bool
    runs_here: bool = True
    why_not: str | None = None  # why this host cannot run it (no GPU of the vendor it needs)


@dataclass(kw_only=True, repr=False, eq=False)
class CatalogEntry(Result):
    id: str
    name: str
    kind: str
    source: str
    variants: list[VariantHere]
    suggested: str | None
    why: str
    installed: list[str]
    activated: str | None


@dataclass(kw_only=True, repr=False, eq=False)
class ReleaseInfo(Result):
    tag: str
    published_at: str | None
    prerelease: bool
    variants: list[str]
    installed: list[str]
    activated: str | None
    runs_here: list[str] | None = None  # of ``variants``, those this host's GPUs can run
