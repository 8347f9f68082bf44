"""Which build can do what, for the planner, ``list``, ``backends`` and ``doctor`` (SPEC §19).

Installed builds carry their capabilities in the receipt (probed at install); manual llama
rows are probed on first use and cached by (path, size, mtime) under the data home.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ..catalog.capabilities import Capabilities, CapabilityIndex, kind_family
from ..config.models import Settings
from ..install.builds import BuildStore
from ..install.probe_cache import CapabilityCache
from ..registry.kinds import normalize_kind

__all__ = ["capability_index", "manual_capabilities"]

CACHE_NAME = "capabilities.json"
OnWait = Callable[[str], None]


def manual_capabilities(
    settings: Settings, cache_dir: Path, on_wait: OnWait | None = None
) -> dict[str, Capabilities]:
    """Probe (or read from the cache) every manual llama row; blocking, for a worker thread.
    ``on_wait`` hears each probe before it starts (it can take seconds)."""
    cache = CapabilityCache(cache_dir / CACHE_NAME)
    out: dict[str, Capabilities] = {}
    for row in settings.backends:
        # only llama rows are probed: theirs are the flags the emitter chooses
        if row.managed or kind_family(row.kind) != "llama" or not row.path.strip():
            continue
        caps = cache.lookup(row.path, on_wait=on_wait)
        if caps is not None:
            out[row.path] = caps
    cache.save()
    return out


def capability_index(
    settings: Settings,
    builds: BuildStore,
    cache_dir: Path,
    *,
    probe_manual: bool = True,
    on_wait: OnWait | None = None,
) -> CapabilityIndex:
    by_path: dict[str, Capabilities] = {}
    for entry in builds.installed():
        if entry.receipt.capabilities is not None:
            by_path[str(entry.exe_path)] = entry.receipt.capabilities
    if probe_manual:
        by_path.update(manual_capabilities(settings, cache_dir, on_wait))
    rows = tuple(
        (row.id, normalize_kind(row.kind), by_path[row.path])
        for row in settings.backends
        if row.build and row.path in by_path
    )
    return CapabilityIndex(by_path=by_path, builds=rows)
