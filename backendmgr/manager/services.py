"""The wiring: every service made once, each given the collaborators its constructor names.
Read top to bottom, it is the dependency order (nothing refers to a service made below it).

Made here and shared: one GPU probe (the adapters and the card's memory, each probed once),
one store of measured contexts and one of bench figures. :class:`.context.Context` is what the
older services still take whole: the config store's locked read-modify-write, the catalog, the
network settings and the HTTP client."""

from __future__ import annotations

from collections.abc import Callable

from ..catalog.host import Host
from ..measure.bench import BenchStore
from ..measure.tuned import TunedStore
from ..requests import PinRequest
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
        paths = ctx.paths
        self.probe = GpuProbe(ctx.environ, host=host, vram=vram_probe)
        site = Site(ctx.builds, ctx.environ, self.probe)
        tuned, benched = TunedStore(paths), BenchStore(paths)
        self.verified = VerifyCache(paths.home, paths.locks, ctx.builds, ctx.environ)
        self.models = Models(ctx, site, tuned, benched, self.verified)
        self.generator = Generator(ctx, self.models)
        self.registry = Registry(ctx, self.models, self.generator)
        self.releases = Releases(ctx, self.probe)
        self.activation = Activation(ctx, self.generator)
        self.switches = Switches(
            ctx.builds, ctx.settings, self.models, self.registry, self.activation
        )
        self.installer = Installer(ctx, self.probe, self.releases, self.activation, self.generator)
        self.uninstaller = Uninstaller(ctx, self.models, self.generator)
        self.inventory = Inventory(paths, ctx.builds, ctx.settings, ctx.manifest, ctx.on_wait)
        self.doctor = Doctor(ctx, self.probe, self.generator)
        self.maintenance = Maintenance(
            paths,
            ctx.builds,
            ctx.settings,
            ctx.manifest,
            self.installer,
            self.uninstaller,
            self.generator,
        )
        self.which = Which(ctx, self.models)
        self.locks = Locks(ctx)
        self.syncer = Syncer(
            ctx.builds,
            ctx.settings,
            ctx.manifest,
            self.locks,
            self.installer,
            self.activation,
            self.uninstaller,
            self.generator,
        )
        self.verifier = Verifier(ctx.environ, ctx.on_wait, self.models, self.verified)
        registry = self.registry
        self.measure = MeasureService(
            site=site,
            tuned=tuned,
            settings=ctx.settings,
            pipeline=self.models.pipeline,
            verify=self.verifier.report,
            pin=lambda model, row: registry.pin(PinRequest(model=model, row=row)),
            regenerate=self.generator.regenerate,
        )
        self.bench = BenchService(self.measure, benched)
        self.canary = Canary(
            paths.home,
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
        self.bisect = Bisect(
            site,
            ctx.builds,
            ctx.settings,
            self.measure,
            self.bench,
            self.releases,
            self.installer,
            self.uninstaller,
        )
        self.swap = SwapService(
            paths,
            settings=ctx.settings,
            output_path=ctx.output_path,
            generate=self.generator.generate,
            environ=ctx.environ,
        )
        self.up = Up(self.swap)
