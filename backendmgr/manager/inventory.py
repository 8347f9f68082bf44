"""What is installed and registered: ``list`` and ``backends`` (each row with its classes and
capabilities; a manual llama row is probed on first use). Plain calls: they read files and
may run a probe, never the network, so the CLI runs them without an event loop."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ..api_models import BackendRowInfo, BuildInfo
from ..catalog.capabilities import Capabilities
from ..immutable import frozen
from .facts import activated_id, pinned_by

if TYPE_CHECKING:
    from ..catalog.manifest import Manifest
    from ..config.models import Settings
    from ..config.paths import Paths
    from ..install.builds import BuildStore

__all__ = ["Inventory"]


@frozen
class Inventory:
    """``list`` and ``backends``: the builds on disk and the registry's rows, read only."""

    paths: Paths
    build_store: BuildStore
    settings: Callable[[], Settings]
    manifest: Callable[[str], Manifest]  # a known component's, else the unknown error
    on_wait: Callable[[str], None] | None  # hears a probe's wait before it waits

    def builds(self, component: str | None = None) -> list[BuildInfo]:
        if component is not None:
            self.manifest(component)
        settings = self.settings()
        out = []
        for e in self.build_store.installed(component):
            r = e.receipt
            primary = r.assets[0] if r.assets else None
            out.append(
                BuildInfo(
                    id=e.id,
                    component=r.component,
                    version=r.version,
                    variant=r.variant,
                    activated=activated_id(settings, r.component) == e.id,
                    path=str(e.exe_path),
                    dir=str(e.dir),
                    size_bytes=r.size_bytes,
                    installed_at=r.installed.isoformat(),
                    sha256=primary.sha256 if primary else None,
                    verified_by=primary.verified_by if primary else None,
                    pinned_by=pinned_by(settings, e.id),
                    capabilities=r.capabilities,
                )
            )
        return out

    def backends(self, *, probe: bool = True) -> list[BackendRowInfo]:
        """The registry in order as ``backends --json`` and the HTTP API show it; without
        ``probe`` (the CLI's table), no capabilities and nothing run."""
        settings = self.settings()
        if not probe:
            return [BackendRowInfo.of(r) for r in settings.backends]
        caps = self.capabilities()
        return [BackendRowInfo.of(r, capabilities=caps.get(r.id)) for r in settings.backends]

    def capabilities(self) -> dict[str, Capabilities | None]:
        """Per registry row: its build's receipt capabilities, or a manual llama row's probe
        (run on first use, then cached by path, size and mtime)."""
        from .capabilities import capability_index

        settings = self.settings()
        cache, on_wait = self.paths.cache, self.on_wait
        index = capability_index(settings, self.build_store, cache, on_wait=on_wait)
        return {row.id: index.of(row.path) for row in settings.backends}
