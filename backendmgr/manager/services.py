"""The wiring: every service made once, on first use, each given the collaborators its
constructor names. Read top to bottom, it is the dependency order (nothing refers to a service
made below it); each service's module is imported by its own property, so a command imports
only the services it touches (``install`` never loads canary, bisect or the swap service).

Made here and shared: one GPU probe (the adapters and the card's memory, each probed once),
one store of measured contexts and one of bench figures. :class:`.context.Context` is what the
older services still take whole: the config store's locked read-modify-write, the catalog, the
network settings and the HTTP client."""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..catalog.host import Host
    from ..measure.store import BenchStore, TunedStore
    from .activate import Activation
    from .bench import BenchService
    from .bisect import Bisect
    from .canary import Canary
    from .context import Context
    from .doctor import Doctor
    from .generate import Generator
    from .install import Installer
    from .inventory import Inventory
    from .lock import Locks
    from .maintenance import Maintenance
    from .measure import MeasureService
    from .models import Models
    from .probe import GpuProbe, Site
    from .registry import Registry
    from .releases import Releases
    from .swap import SwapService
    from .switch import Switches
    from .sync import Syncer
    from .uninstall import Uninstaller
    from .up import Up
    from .verify import Verifier
    from .verify_cache import VerifyCache
    from .which import Which

__all__ = ["Services"]


class Services:
    def __init__(
        self,
        ctx: Context,
        *,
        host: Host | None = None,
        vram_probe: Callable[[], float | None] | None = None,
    ) -> None:
        self.ctx = ctx
        self._host, self._vram_probe = host, vram_probe

    # --- shared collaborators --------------------------------------------------------------

    @cached_property
    def probe(self) -> GpuProbe:
        from .probe import GpuProbe

        return GpuProbe(self.ctx.environ, host=self._host, vram=self._vram_probe)

    @cached_property
    def site(self) -> Site:
        from .probe import Site

        return Site(self.ctx.builds, self.ctx.environ, self.probe)

    @cached_property
    def tuned(self) -> TunedStore:
        from ..measure.store import TunedStore

        return TunedStore(self.ctx.paths)

    @cached_property
    def benched(self) -> BenchStore:
        from ..measure.store import BenchStore

        return BenchStore(self.ctx.paths)

    @cached_property
    def verified(self) -> VerifyCache:
        from .verify_cache import VerifyCache

        ctx = self.ctx
        return VerifyCache(ctx.paths.home, ctx.paths.locks, ctx.builds, ctx.environ)

    # --- services, in dependency order -----------------------------------------------------

    @cached_property
    def models(self) -> Models:
        from .models import Models

        return Models(self.ctx, self.site, self.tuned, lambda: self.benched, lambda: self.verified)

    @cached_property
    def generator(self) -> Generator:
        from .generate import Generator

        return Generator(self.ctx, lambda: self.models)  # planned when it regenerates

    @cached_property
    def registry(self) -> Registry:
        from .registry import Registry

        return Registry(self.ctx, self.models, self.generator)

    @cached_property
    def releases(self) -> Releases:
        from .releases import Releases

        return Releases(self.ctx, self.probe)

    @cached_property
    def activation(self) -> Activation:
        from .activate import Activation

        return Activation(self.ctx, self.generator)

    @cached_property
    def switches(self) -> Switches:
        from .switch import Switches

        ctx = self.ctx
        return Switches(
            ctx.builds, ctx.settings, self.models, self.registry, lambda: self.activation
        )

    @cached_property
    def installer(self) -> Installer:
        from .install import Installer

        return Installer(self.ctx, self.probe, self.releases, self.activation, self.generator)

    @cached_property
    def uninstaller(self) -> Uninstaller:
        from .uninstall import Uninstaller

        return Uninstaller(self.ctx, self.models, self.generator)

    @cached_property
    def inventory(self) -> Inventory:
        from .inventory import Inventory

        ctx = self.ctx
        return Inventory(ctx.paths, ctx.builds, ctx.store.read, ctx.manifest, ctx.on_wait)

    @cached_property
    def doctor(self) -> Doctor:
        from .doctor import Doctor

        return Doctor(self.ctx, self.probe, self.generator)

    @cached_property
    def maintenance(self) -> Maintenance:
        from .maintenance import Maintenance

        ctx = self.ctx
        return Maintenance(
            ctx.paths,
            ctx.builds,
            ctx.settings,
            ctx.manifest,
            self.installer,
            self.uninstaller,
            self.generator,
        )

    @cached_property
    def which(self) -> Which:
        from .which import Which

        return Which(self.ctx, lambda: self.models)

    @cached_property
    def locks(self) -> Locks:
        from .lock import Locks

        return Locks(self.ctx)

    @cached_property
    def syncer(self) -> Syncer:
        from .sync import Syncer

        ctx = self.ctx
        return Syncer(
            ctx.builds,
            ctx.settings,
            ctx.manifest,
            self.locks,
            self.installer,
            self.activation,
            self.uninstaller,
            self.generator,
        )

    @cached_property
    def verifier(self) -> Verifier:
        from .verify import Verifier

        return Verifier(self.ctx.environ, self.ctx.on_wait, self.models, self.verified)

    @cached_property
    def measure(self) -> MeasureService:
        from ..requests import PinRequest
        from .measure import MeasureService

        registry = self.registry
        return MeasureService(
            site=self.site,
            tuned=self.tuned,
            settings=self.ctx.settings,
            pipeline=self.models.pipeline,
            verify=self.verifier.report,
            pin=lambda model, row: registry.pin(PinRequest(model=model, row=row)),
            regenerate=self.generator.regenerate,
        )

    @cached_property
    def bench(self) -> BenchService:
        from .bench import BenchService

        return BenchService(self.measure, self.benched)

    @cached_property
    def canary(self) -> Canary:
        from .canary import Canary

        ctx = self.ctx
        return Canary(
            ctx.paths.home,
            ctx.builds,
            ctx.settings,
            self.models,
            self.measure,
            self.bench,
            self.verifier,
            self.switches,
            self.registry,
            self.generator,
            self.installer,
        )

    @cached_property
    def bisect(self) -> Bisect:
        from .bisect import Bisect

        ctx = self.ctx
        return Bisect(
            self.site,
            ctx.builds,
            ctx.settings,
            self.measure,
            self.bench,
            self.releases,
            self.installer,
            self.uninstaller,
        )

    @cached_property
    def swap(self) -> SwapService:
        from .swap import SwapService

        ctx = self.ctx
        return SwapService(
            ctx.paths,
            settings=ctx.settings,
            output_path=ctx.output_path,
            generate=self.generator.generate,
            environ=ctx.environ,
        )

    @cached_property
    def up(self) -> Up:
        from .up import Up

        return Up(self.swap)
