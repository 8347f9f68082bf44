"""The async service layer: every operation the CLI and the HTTP API can ask for.

:class:`Manager` is a thin façade over plain services, each in the module named for what it
does (``install``, ``activate``, ``uninstall``, ``verify``, ``lock`` …) and each given its
collaborators when it is made; :mod:`.context` holds what they share and :mod:`.facts` the
small facts several of them ask for. Every operation with options takes exactly one request
from :mod:`backendmgr.requests` (its defaults and rules declared there, once).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cached_property
from typing import TYPE_CHECKING, Unpack

from .context import Context, Options
from .registry import SETTABLE_KEYS

if TYPE_CHECKING:
    from ..api_models import (
        ActivateResult,
        BackendRowInfo,
        BackendRowResult,
        BuildInfo,
        CacheCleanResult,
        CanaryReport,
        CatalogEntry,
        CmdResult,
        ConfigInfo,
        DoctorReport,
        FetchResult,
        GeneratedText,
        GenerateResult,
        InstallResult,
        LockResult,
        ModelInfo,
        ModelsDirResult,
        ModelSettingsResult,
        PinResult,
        PruneResult,
        ReleaseInfo,
        RemovedRow,
        SyncResult,
        UninstallResult,
        UpdateResult,
        VerifyReport,
        WhichResult,
    )
    from ..catalog.host import Host
    from ..catalog.manifest import Catalog, Manifest
    from ..config.models import BackendRow, Settings
    from ..config.paths import Paths
    from ..events import EventSink
    from ..requests import (
        ActivateRequest,
        AddBackendRequest,
        CacheCleanRequest,
        CanaryRequest,
        CmdRequest,
        DefaultRequest,
        DoctorRequest,
        FetchRequest,
        GenerateRequest,
        InstallRequest,
        ListRequest,
        LockRequest,
        ModelsDirRequest,
        PinRequest,
        PruneRequest,
        ReleasesQuery,
        RemoveBackendRequest,
        SetRequest,
        SyncRequest,
        UninstallRequest,
        UnpinRequest,
        UnsetRequest,
        UpdateRequest,
        VerifyRequest,
        WhichRequest,
    )
    from .bench import BenchService, OnRun
    from .measure import MeasureService
    from .services import Services
    from .swap import SwapService
    from .verify import OnJobEvent, OnResult, OnStart

__all__ = ["SETTABLE_KEYS", "Manager"]


class Manager:
    """One config file and one data home; the object every front end drives.

    >>> from backendmgr.config.paths import Paths
    >>> mgr = Manager(Paths.resolve(config="/tmp/c.yaml", home="/tmp/h"))
    """

    def __init__(self, paths: Paths | None = None, **options: Unpack[Options]) -> None:
        self.ctx = Context(paths, **options)
        self.paths = self.ctx.paths
        self.environ = self.ctx.environ
        self.store = self.ctx.store
        self.builds = self.ctx.builds

    @cached_property
    def _s(self) -> Services:
        """The services, made on the first operation (``--help`` and <TAB> make none)."""
        from .services import Services

        return Services(self.ctx)

    @cached_property
    def measure(self) -> MeasureService:
        """``verify --repair`` and ``tune``: pins and contexts chosen by evidence (issue 22)."""
        from .measure import MeasureService

        return MeasureService.of(self.ctx, self._s)

    @cached_property
    def bench(self) -> BenchService:
        """``bench``: prompt and generation speed per model and build (issue 32)."""
        from .bench import BenchService

        return BenchService(self.measure)

    @cached_property
    def swap(self) -> SwapService:
        """llama-swap itself: ``up``, the service, ``status``, the reload proof (issue 21)."""
        from .swap import SwapService

        return SwapService(
            self.paths,
            settings=self.ctx.settings,
            output_path=self.ctx.output_path,
            generate=self.generate,
            environ=self.environ,
        )

    # --- what the services share ---------------------------------------------------------

    @property
    def catalog(self) -> Catalog:
        return self.ctx.catalog

    @property
    def host(self) -> Host:
        return self.ctx.host

    def manifest(self, component: str) -> Manifest:
        return self.ctx.manifest(component)

    async def settings(self) -> Settings:
        return await self.ctx.settings()

    async def backends(self) -> list[BackendRow]:
        return list((await self.ctx.settings()).backends)

    # --- components and builds -------------------------------------------------------------

    async def catalog_info(self) -> list[CatalogEntry]:
        return await self._s.releases.catalog()

    async def releases(self, query: ReleasesQuery) -> list[ReleaseInfo]:
        return await self._s.releases.recent(query)

    async def install(
        self,
        request: InstallRequest,
        *,
        on_event: EventSink | None = None,
        expected_sha256: Mapping[str, str] | None = None,
        locked_packages: Mapping[str, str] | None = None,
    ) -> InstallResult:
        """Install one build (SPEC §7); the newest release with this variant when no version.

        ``expected_sha256`` and ``locked_packages`` hold it to a lock file (``sync``): the
        assets' SHA-256 by name, or every distribution of the venv by name. ``on_event`` sees
        the phases in order and then exactly one terminal event: ``done``, ``failed`` (its
        message is the error's) or ``cancelled`` (the task was cancelled).
        """
        from .install import Locked

        locked = Locked(sha256=expected_sha256, packages=locked_packages)
        return await self._s.installer.install(request, on_event, locked)

    async def activate(self, request: ActivateRequest) -> ActivateResult:
        """Switch the activated build; refused when a model following it uses a flag the build
        does not list (issue 32), unless ``force``."""
        from .facts import find_build
        from .flags import check_switch, followers

        entry = find_build(self.builds, request.build)
        plan = await self._s.models.plan()
        models = followers(plan, entry.receipt.component)
        kept = check_switch(plan.settings, models, entry, force=request.force)
        result = await self._s.activation.activate(request)
        return result.model_copy(update={"warnings": [*kept, *result.warnings]}) if kept else result

    async def canary(self, request: CanaryRequest, *, on_run: OnRun | None = None) -> CanaryReport:
        """``activate BUILD --canary MODEL…`` (issue 32): only the canaries move first; every
        one healthy and within the tolerance promotes the build, anything else rolls back."""
        from .canary import canary

        return await canary(self, request, on_run=on_run)

    async def uninstall(self, request: UninstallRequest) -> UninstallResult:
        """Remove one or more builds; every one is checked first, so none or all go (§9)."""
        return await self._s.uninstaller.uninstall(request)

    async def list_builds(self, request: ListRequest) -> list[BuildInfo]:
        return await self._s.inventory.builds(request.component)

    async def backends_info(self, *, probe: bool = True) -> list[BackendRowInfo]:
        """Each registry row with its classes and (``probe``) capabilities."""
        return await self._s.inventory.backends(probe=probe)

    async def doctor(self, request: DoctorRequest) -> DoctorReport:
        return await self._s.doctor.check(request)

    # --- upkeep ----------------------------------------------------------------------------

    async def update(
        self, request: UpdateRequest, *, on_event: EventSink | None = None
    ) -> UpdateResult:
        return await self._s.maintenance.update(request, on_event)

    async def prune(self, request: PruneRequest) -> PruneResult:
        return await self._s.maintenance.prune(request)

    async def cache_clean(self, request: CacheCleanRequest) -> CacheCleanResult:
        return await self._s.maintenance.cache_clean(request)

    async def which(self, request: WhichRequest) -> WhichResult:
        return await self._s.which.which(request.target)

    def local_names(self, kind: str) -> list[str]:
        return self._s.which.local_names(kind)

    async def config_info(self) -> ConfigInfo:
        return await self._s.which.config_info()

    # --- registry and overrides --------------------------------------------------------------

    async def add_backend(self, request: AddBackendRequest) -> BackendRowResult:
        """Append a manual row; a path that is missing or not executable needs ``force``."""
        return await self._s.registry.add_backend(request)

    async def remove_backend(self, request: RemoveBackendRequest) -> RemovedRow:
        return await self._s.registry.remove_backend(request)

    async def set_default(self, request: DefaultRequest) -> BackendRowResult:
        return await self._s.registry.set_default(request)

    # ``dry_run``: the same path stopped before the write; ``changed`` and ``diff`` say what
    # the real run would do (issue 29)
    async def pin(self, request: PinRequest) -> PinResult:
        """Pin the model to the row; a build that does not list a flag of the model's
        ``extra_args`` refuses it (issue 32), unless ``force``."""
        from .flags import check_switch

        model, row_id = request.model, request.row
        settings = await self.settings()
        row = settings.row(row_id)
        kept: list[str] = []
        if row is not None and row.build:
            entry = next((e for e in self.builds.installed() if e.id == row_id), None)
            if entry is not None:
                kept = check_switch(settings, [model], entry, force=request.force)
        result = await self._s.registry.pin(request)
        return result.model_copy(update={"warnings": [*kept, *result.warnings]}) if kept else result

    async def unpin(self, request: UnpinRequest) -> PinResult:
        return await self._s.registry.unpin(request)

    async def set_overrides(self, request: SetRequest) -> ModelSettingsResult:
        return await self._s.registry.set_overrides(request)

    async def unset_overrides(self, request: UnsetRequest) -> ModelSettingsResult:
        return await self._s.registry.unset_overrides(request)

    # --- models and the generated config ---------------------------------------------------

    async def models_dir(self, request: ModelsDirRequest) -> ModelsDirResult:
        """Add a folder to ``models_dirs``, or remove one (``add`` false)."""
        return await self._s.registry.models_dir(request)

    async def models_info(self) -> list[ModelInfo]:
        return await self._s.models.info()

    async def folder_problems(self) -> list[str]:
        return await self._s.models.folder_problems()

    async def cmd(self, request: CmdRequest) -> CmdResult:
        return await self._s.models.cmd(request.model)

    async def generate(self, request: GenerateRequest) -> GenerateResult:
        """Rewrite the llama-swap config when its inputs changed (``force``: always)."""
        return await self._s.generator.generate(request)

    async def generated(self) -> GeneratedText:
        return await self._s.generator.generated()

    async def regenerate(self) -> list[str]:
        return await self._s.generator.regenerate()

    async def verify(
        self,
        request: VerifyRequest,
        *,
        on_result: OnResult | None = None,
        on_start: OnStart | None = None,
        on_event: OnJobEvent | None = None,
    ) -> VerifyReport:
        """Check each named model (all emitted ones when none): the results, how many failed,
        and the models a stop at the first failure left unchecked; ``on_event`` hears typed
        job events (``verifying``, then ``verified`` with the result)."""
        return await self._s.verifier.report(request, on_result, on_start, on_event)

    # --- lock files ------------------------------------------------------------------------

    async def lock(self, request: LockRequest) -> LockResult:
        return await self._s.locks.lock(request.output, fetch=request.fetch)

    async def fetch(self, request: FetchRequest) -> FetchResult:
        return await self._s.locks.fetch(request.dir, request.lock)

    async def sync(self, request: SyncRequest, *, on_event: EventSink | None = None) -> SyncResult:
        return await self._s.syncer.sync(request, on_event)
