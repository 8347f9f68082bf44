"""What every service shares: paths, the config and build stores, the catalog, network
settings, the HTTP client, and the locked read-modify-write of the config file. The machine's
GPUs are not here: :class:`.probe.GpuProbe`, made in :mod:`.services`, is given to the services
that plan or measure for them."""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator, Callable, Mapping
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict, TypeVar, Unpack

from ..config.models import Settings
from ..config.paths import Paths
from ..config.store import ConfigStore, Then
from ..errors import unknown
from ..install.builds import BuildStore

if TYPE_CHECKING:
    import httpx

    from ..catalog.host import Host
    from ..catalog.manifest import Catalog, Manifest
    from ..net import NetSettings
    from ..sources.github import GithubReleases

    class Options(TypedDict, total=False):
        """What a Manager can be given besides its paths (tests and embedders set them): a
        type for the checker, ``**options`` being a plain dict when it runs. Made at run time
        it would cost every command typing's compile of each of its annotations."""

        environ: Mapping[str, str] | None  # default: this process's environment
        host: Host | None  # default: detected on first use (the GPU probe's)
        client_factory: Callable[[], httpx.AsyncClient] | None  # default: net.make_client
        retry_backoff: float  # seconds before the first download retry (default 0.5)
        vram_probe: Callable[[], float | None] | None  # default: vram.probe_card_gb (the probe's)
        # hears what a step that can take seconds (a probe) waits for, before it waits
        # (issue 20); it may be called from a worker thread
        on_wait: Callable[[str], None] | None


__all__ = ["Context"]

T = TypeVar("T")
R = TypeVar("R")


class Context:
    """One config file and one data home, and how to reach the network."""

    def __init__(self, paths: Paths | None = None, **options: Unpack[Options]) -> None:
        environ = options.get("environ")
        self.paths = paths or Paths.resolve(environ=environ)
        self.environ = dict(os.environ if environ is None else environ)
        self.store = ConfigStore(self.paths.config_file, self.paths.config_lock)
        self.builds = BuildStore(self.paths)
        self._client_factory = options.get("client_factory")
        self.retry_backoff = options.get("retry_backoff", 0.5)
        self.on_wait = options.get("on_wait")

    @cached_property
    def catalog(self) -> Catalog:
        # Built on first use: the manifest models cost most of a listing's start-up.
        from ..catalog.manifest import load_catalog

        return load_catalog(self.paths.user_manifests, cache=self.paths.cache)

    def component_ids(self) -> list[str]:
        """The known components' ids, as :attr:`catalog` lists them. Without a user manifest
        these are the built-in files' names (a built-in id names its file), so a read that
        only asks whether a word is a component (``which``, <TAB>) loads no manifest module."""
        if "catalog" not in self.__dict__:
            from ..catalog.ids import builtin_ids
            from ..config.locate import manifest_names

            if not manifest_names(self.paths.user_manifests):  # none, or no folder
                return list(builtin_ids())
        return self.catalog.ids()

    @cached_property
    def net(self) -> NetSettings:
        from ..net import NetSettings  # what reaches the network; no read asks

        return NetSettings.from_env(self.environ)

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
        """The settings, read in a worker thread (a read's service calls ``store.read``)."""
        from .._inline import in_thread  # an async caller's: a read on the CLI loads none

        return await in_thread(self.store.read)

    async def update(self, change: Callable[[Settings], tuple[Settings, T]]) -> T:
        """Apply ``change`` to the config file under its lock, in a worker thread."""
        from .._inline import in_thread

        return await in_thread(self.store.update, change)

    async def transact(
        self, change: Callable[[Settings], tuple[Settings, T]], then: Then[R]
    ) -> tuple[T, R]:
        """``update`` with ``then`` under the same lock, in a worker thread: what the change
        writes of its own is checked before the config is (:meth:`.ConfigStore.transact`)."""
        from .._inline import in_thread

        return await in_thread(self.store.transact, change, then)

    async def preview(self, change: Callable[[Settings], tuple[Settings, T]]) -> tuple[T, str]:
        """``update`` without the write (a dry run): ``change``'s result and the file's diff."""
        from .._inline import in_thread

        return await in_thread(self.store.preview, change)

    def output_path(self, settings: Settings, output: str | None = None) -> Path:
        """``--output`` as typed (from the working folder), else the config's ``output`` as
        the config means it, else the default beside the config."""
        if output:
            return Path(output).expanduser().absolute()
        if settings.output:
            from ..config.paths import as_config_means

            return Path(as_config_means(self.store.path, settings.output))
        return self.paths.default_output

    def build_lock(
        self,
        component: str,
        version: str,
        variant: str,
        on_wait: Callable[[int | None], None] | None = None,
    ) -> contextlib.AbstractAsyncContextManager[bool]:
        """The per-build file lock: one install or uninstall of a build at a time. Yields
        whether another process held it first; ``on_wait`` hears its pid when we start waiting."""
        from .._locks import hold

        return hold(self.builds.lock(component, version, variant), on_wait=on_wait)
