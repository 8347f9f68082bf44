"""A failed start's cause with its fix, and the other builds that might serve the model.

Pure, over the settings and a planned entry: ``verify`` attaches :func:`failure_cause` to a
failed result; ``verify --repair`` tries :func:`other_rows` in order.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..registry.kinds import classes_of, normalize_kind
from ..versioning import version_key
from .reasons import FailureCause, classify, explain

if TYPE_CHECKING:
    from ..config.models import BackendRow, Settings
    from ..discovery.models import DiscoveredModel
    from ..registry.resolve import Resolution

__all__ = ["failure_cause", "newer_row", "other_rows"]


def other_rows(
    settings: Settings, model: DiscoveredModel, current: BackendRow | None, cls: str = "llm"
) -> list[BackendRow]:
    """Rows other than ``current`` whose kind serves the model: installed builds (their build
    rows, SPEC §3.2) newest first, then hand-made rows in registry order (they carry no version
    to order them by). A component's own row is left out: it follows activation, so a pin to it
    is not a pin to a build, and its build has a row of its own."""
    embedding = model.role != "chat"
    fitting = []
    for row in settings.backends:
        kind = normalize_kind(row.kind)
        if row.managed and not row.build:
            continue
        if current is not None and (row.id == current.id or row.path == current.path):
            continue
        if cls not in classes_of(row.kind):
            continue
        if (embedding and kind == "vllm") or (model.format == "hf" and kind != "vllm"):
            continue
        fitting.append(row)
    builds = sorted(
        (r for r in fitting if r.build and r.version),
        key=lambda r: version_key(r.version),
        reverse=True,
    )
    return builds + [r for r in fitting if not (r.build and r.version)]


def newer_row(
    settings: Settings, model: DiscoveredModel, current: BackendRow | None, cls: str = "llm"
) -> BackendRow | None:
    """The newest installed build that serves the model, if newer than ``current``'s."""
    for row in other_rows(settings, model, current, cls):
        if not (row.build and row.version):
            return None
        if current is None or not (current.managed and current.version):
            return row
        if normalize_kind(row.kind) != normalize_kind(current.kind):
            return row
        return row if version_key(row.version) > version_key(current.version) else None
    return None


def failure_cause(
    settings: Settings, model: DiscoveredModel, res: Resolution, reason: str | None
) -> FailureCause | None:
    """The recognised cause of ``reason`` with its fix, or None (the plain reason stands)."""
    match = classify(reason)
    if match is None:
        return None
    row = res.row
    better = newer_row(settings, model, row, res.cls)
    context = {
        "model": model.id,
        "component": row.component if row is not None and row.managed else None,
        "better": better.id if better is not None else None,
    }
    return explain(match, context)
