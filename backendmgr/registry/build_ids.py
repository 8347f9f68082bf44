"""The ids of installed builds, apart from :mod:`.rows`: the planner and ``which`` name a
row's build without loading the registry's rules (nor ``packaging``, which orders versions)."""

from __future__ import annotations

from ..config.models import BackendRow

__all__ = ["build_id_of", "build_row_id"]


def build_row_id(component: str, version: str, variant: str) -> str:
    return f"{component}@{version}-{variant}"


def build_id_of(row: BackendRow | None) -> str | None:
    """The installed build a row runs: a build row's own, a managed row's activated one;
    None for a manual row (or a managed row with no build yet)."""
    if row is None or not row.managed or not row.version:
        return None
    return row.id if row.build else build_row_id(row.component, row.version, row.variant)
