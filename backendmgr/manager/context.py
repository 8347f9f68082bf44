"""What every service shares: paths, the config and build stores, the catalog, host facts and
network settings, the HTTP client, and the locked read-modify-write of the config file."""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator, Callable, Mapping
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict, TypeVar, Unpack

import anyio

from .._locks import hold
from ..catalog.host import Host, detect_host, parse_platform
from ..config.models import Settings
from ..config.paths import Paths
from ..config.store import ConfigStore
from ..errors import unknown
from ..install.store import BuildStore
from ..net import NetSettings

if TYPE_CHECKING:
    import httpx

    from ..catalog.manifest import Catalog, Manifest
    from ..sources.github import GithubReleases

__all__ = ["Context", "Options"]

T = TypeVar("T")


class Options(TypedDict, total=False):
    """What a Manager can be given besides its paths (tests and embedders set them)."""

    environ: Mapping[str, str] | None  # default: this process's environment
    host: Host | None  # default: detected on first use
    client_factory: Callable[[], httpx.AsyncClient] | None  # default: net.make_client
    retry_backoff: float  # seconds before the first download retry (default 0.5)
    vram_probe: Callable[[], float | None] | None  # default: vram.probe_card_gb
    # hears what a step that can take seconds (a probe) waits for, before it waits (issue 20);
    # it may be called from a worker thread
    on_wait: Callable[[str], None] | None


class Context:
    """One config file and one data home, and what is known about this machine."""

    def __init__(self, paths: Paths | None = None, **options: Unpack[Options]) -> None:
        environ = options.get("environ")
        self.paths = paths or Paths.resolve(environ=environ)
        self.environ = dict(os.environ if environ is None else environ)
        self.store = ConfigStore(self.paths.config_file, self.paths.config_lock)
        self.builds = BuildStore(self.paths)
        self._host = options.get("host")
        self._client_factory = options.get("client_factory")
        self.retry_backoff = options.get("retry_backoff", 0.5)
        self._vram_probe = options.get("vram_probe")
        self.on_wait = options.get("on_wait")
        self._card: tuple[float | None] | None = None

    @cached_property
    def catalog(self) -> Catalog:
        # Built on first use: the manifest models cost most of a listing's start-up.
        from ..catalog.manifest import load_catalog

        return load_catalog(self.paths.user_manifests, cache=self.paths.cache)

    @property
    def host(self) -> Host:
        if self._host is None:
            self._host = detect_host(self.environ)
        return self._host

    @cached_property
    def net(self) -> NetSettings:
        return NetSettings.from_env(self.environ)

    @property
    def card_gb(self) -> float | None:
        """The GPU's total memory, probed once per Manager (one per CLI process)."""
        if self._card is None:
            from ..vram import probe_card_gb

            probe = self._vram_probe or (lambda: probe_card_gb(self.environ))
            self._card = (probe(),)
        return self._card[0]

    def manifest(self, component: str) -> Manifest:
        manifest = self.catalog.get(component)
        if manifest is None:
            ids = self.catalog.ids()
            raise unknown(
                f'unknown component "{component}"',
                component,
                ids,
                hint=f"known components: {', '.join(ids)}",
            )
        return manifest

    @contextlib.asynccontextmanager
    async def github(self) -> AsyncIterator[GithubReleases]:
        from ..net import make_client
        from ..sources.github import GithubReleases

        client = self._client_factory() if self._client_factory else make_client(self.net)
        async with client:
            yield GithubReleases(client, self.net, self.paths.cache)

    async def settings(self) -> Settings:
        return await anyio.to_thread.run_sync(self.store.read)

    async def update(self, change: Callable[[Settings], tuple[Settings, T]]) -> T:
        """Apply ``change`` to the config file under its lock, in a worker thread."""
        return await anyio.to_thread.run_sync(self.store.update, change)

    async def preview(self, change: Callable[[Settings], tuple[Settings, T]]) -> tuple[T, str]:
        """``update`` without the write (a dry run): ``change``'s result and the file's diff."""
        return await anyio.to_thread.run_sync(self.store.preview, change)

    def output_path(self, settings: Settings, output: str | None = None) -> Path:
        chosen = output or settings.output
        return Path(chosen).expanduser().absolute() if chosen else self.paths.default_output

    def platform(self, platform: str | None) -> tuple[str, str]:
        """(os, arch): ``platform`` parsed, else this machine's."""
        if platform:
            return parse_platform(platform)
        return self.host.os, self.host.arch

    def build_lock(
        self,
        component: str,
        version: str,
        variant: str,
        on_wait: Callable[[int | None], None] | None = None,
    ) -> contextlib.AbstractAsyncContextManager[bool]:
        """The per-build file lock: one install or uninstall of a build at a time. Yields
        whether another process held it first; ``on_wait`` hears its pid when we start waiting."""
        return hold(self.builds.lock(component, version, variant), on_wait=on_wait)
