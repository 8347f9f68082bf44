"""The wiring: every service made once, each given the collaborators its constructor names.
Read top to bottom, it is the dependency order (nothing refers to a service made below it)."""

from __future__ import annotations

from .activate import Activation
from .context import Context
from .doctor import Doctor
from .generate import Generator
from .install import Installer
from .inventory import Inventory
from .lock import Locks
from .maintenance import Maintenance
from .models import Models
from .registry import Registry
from .releases import Releases
from .sync import Syncer
from .uninstall import Uninstaller
from .verify import Verifier
from .verify_cache import VerifyCache
from .which import Which

__all__ = ["Services"]


class Services:
    def __init__(self, ctx: Context) -> None:
        paths = ctx.paths
        self.verified = VerifyCache(paths.home, paths.locks, ctx.builds, ctx.environ)
        self.models = Models(ctx, self.verified)
        self.generator = Generator(ctx, self.models)
        self.registry = Registry(ctx, self.models, self.generator)
        self.releases = Releases(ctx)
        self.activation = Activation(ctx, self.generator)
        self.installer = Installer(ctx, self.releases, self.activation, self.generator)
        self.uninstaller = Uninstaller(ctx, self.models, self.generator)
        self.inventory = Inventory(ctx)
        self.doctor = Doctor(ctx, self.generator)
        self.maintenance = Maintenance(ctx, self.installer, self.uninstaller, self.generator)
        self.which = Which(ctx, self.models)
        self.locks = Locks(ctx)
        self.syncer = Syncer(
            ctx, self.locks, self.installer, self.activation, self.uninstaller, self.generator
        )
        self.verifier = Verifier(ctx, self.models, self.verified)
