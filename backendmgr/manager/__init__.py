"""The async service layer: every operation the CLI and the HTTP API can ask for.

The reads (``list``, ``backends``, ``which``, ``models``, ``cmd``, ``config``) are plain
calls: they read files and may run a local probe, never the network, and a user waits on
them at every prompt, so the CLI runs them without starting an event loop (anyio, asyncio);
the HTTP API calls them in a worker thread.

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

from .context import Context

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
        VerifyResult,
        WhichResult,
    )
    from ..catalog.host import Host
    from ..catalog.manifest import Manifest
    from ..config.models import BackendRow, Settings
    from ..config.paths import Paths
    from ..events import EventSink
    from ..measure.results import BenchReport, RepairReport, TuneReport
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
    from ..run_requests import (
        BenchRequest,
        BisectRequest,
        RepairRequest,
        ServiceRequest,
        StatusRequest,
        TuneRequest,
        UpRequest,
    )
    from ..swap.models import ServiceResult, SwapStatus
    from .bench import OnRun
    from .bisect import BisectReport, OnStep
    from .context import Options
    from .measure import OnAttempt, OnTrial
    from .registry import SETTABLE_KEYS
    from .services import Services
    from .swap import FollowUp, Prepared, SwapMark
    from .up import UpListeners
    from .verify import OnJobEvent, OnResult, OnStart

__all__ = ["SETTABLE_KEYS", "Manager", "UpListeners"]


def __getattr__(name: str) -> object:
    """``SETTABLE_KEYS`` and ``UpListeners`` from the modules that own them, loaded when asked
    for: a read imports neither module (nor anyio, which both need)."""
    if name == "SETTABLE_KEYS":
        from .registry import SETTABLE_KEYS

        return SETTABLE_KEYS
    if name == "UpListeners":
        from .up import UpListeners

        return UpListeners
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class Manager:
    """One config file and one data home; the object every front end drives.

    >>> from backendmgr.config.paths import Paths
    >>> mgr = Manager(Paths.resolve(config="/tmp/c.yaml", home="/tmp/h"))
    """

    def __init__(self, paths: Paths | None = None, **options: Unpack[Options]) -> None:
        self.ctx = Context(paths, **options)
        self._probe_given = (options.get("host"), options.get("vram_probe"))
        self.paths = self.ctx.paths
        self.environ = self.ctx.environ
        self.store = self.ctx.store
        self.builds = self.ctx.builds

    @cached_property
    def _s(self) -> Services:
        """The services, made on the first operation (``--help`` and <TAB> make none)."""
        from .services import Services

        host, vram_probe = self._probe_given
        return Services(self.ctx, host=host, vram_probe=vram_probe)

    # --- what the services share ---------------------------------------------------------

    @property
    def host(self) -> Host:
        return self._s.probe.host

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
        return await self._s.switches.activate(request)

    async def uninstall(self, request: UninstallRequest) -> UninstallResult:
        """Remove one or more builds; every one is checked first, so none or all go (§9)."""
        return await self._s.uninstaller.uninstall(request)

    def list_builds(self, request: ListRequest) -> list[BuildInfo]:
        return self._s.inventory.builds(request.component)

    def backends_info(self, *, probe: bool = True) -> list[BackendRowInfo]:
        """Each registry row with its classes and (``probe``) capabilities."""
        return self._s.inventory.backends(probe=probe)

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

    def which(self, request: WhichRequest) -> WhichResult:
        return self._s.which.which(request.target)

    def local_names(self, kind: str) -> list[str]:
        from .facts import local_names

        return local_names(self.ctx, kind)

    def config_info(self) -> ConfigInfo:
        return self._s.which.config_info()

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
        return await self._s.switches.pin(request)

    async def unpin(self, request: UnpinRequest) -> PinResult:
        return await self._s.switches.unpin(request)

    async def set_overrides(self, request: SetRequest) -> ModelSettingsResult:
        return await self._s.registry.set_overrides(request)

    async def unset_overrides(self, request: UnsetRequest) -> ModelSettingsResult:
        return await self._s.registry.unset_overrides(request)

    # --- models and the generated config ---------------------------------------------------

    async def models_dir(self, request: ModelsDirRequest) -> ModelsDirResult:
        """Add a folder to ``models_dirs``, or remove one (``add`` false)."""
        return await self._s.registry.models_dir(request)

    def models_report(self) -> tuple[list[ModelInfo], list[str]]:
        """Every discovered model, and the warnings about their folders, from one walk."""
        return self._s.models.report()

    def cmd(self, request: CmdRequest) -> CmdResult:
        return self._s.models.cmd(request.model)

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

    # --- measured starts: tune, repair, bench, canary, bisect (issues 22 and 32) -----------

    async def tune(self, request: TuneRequest, *, on_trial: OnTrial | None = None) -> TuneReport:
        """The largest context that starts and fits the budget, recorded per model and build."""
        return await self._s.measure.tune(request, on_trial=on_trial)

    async def repair(
        self,
        request: RepairRequest,
        *,
        on_result: OnResult | None = None,
        on_attempt: OnAttempt | None = None,
    ) -> tuple[list[VerifyResult], RepairReport]:
        """``verify --repair``: each failing model pinned to the first other build serving it."""
        return await self._s.measure.repair(request, on_result=on_result, on_attempt=on_attempt)

    async def bench(self, request: BenchRequest, *, on_run: OnRun | None = None) -> BenchReport:
        return await self._s.bench.bench(request, on_run=on_run)

    async def canary(self, request: CanaryRequest, *, on_run: OnRun | None = None) -> CanaryReport:
        """Move the canaries to the build first, measure; promote it or roll back."""
        return await self._s.canary.run(request, on_run=on_run)

    def installed_build(self, ref: str) -> str:
        """The id of the installed build ``ref`` names; refused (the nearest named) if none."""
        from .facts import find_build

        return find_build(self.builds, ref).id

    async def canary_build(self, models: list[str], component: str | None) -> str | None:
        """``update --canary``: the newest build installed (not activated); None: it is already."""
        return await self._s.canary.newest(models, component)

    async def bisect(
        self, request: BisectRequest, *, on_step: OnStep | None = None
    ) -> BisectReport:
        return await self._s.bisect.run(request, on_step=on_step)

    # --- llama-swap itself: up, the service, status, the reload proof (issue 21) ---------------

    async def up(self, request: UpRequest, heard: UpListeners) -> Prepared:
        """Serve the generated config in the foreground until ``heard.watch`` says stop."""
        return await self._s.up.run(request, heard)

    async def service(self, request: ServiceRequest) -> ServiceResult:
        return await self._s.swap.service(request)  # type: ignore[no-any-return]

    async def swap_status(self, request: StatusRequest) -> SwapStatus:
        return await self._s.swap.status()  # type: ignore[no-any-return]

    def swap_quiet(self) -> bool:
        """Whether no llama-swap runs and no service is installed: a mutation then has no
        follow-up and needs no event loop (the CLI runs it inline, issue 30). Looks at two
        paths, without the swap service's modules."""
        from ..swap.places import quiet

        return quiet(self.paths.home, self.environ)

    async def swap_mark(self) -> SwapMark | None:
        """Before a mutation: what it may change in a running llama-swap or its service."""
        return await self._s.swap.mark()

    async def swap_follow(self, mark: SwapMark | None) -> FollowUp:
        """After it: the reload proof, or the service restarted on a new llama-swap build."""
        return await self._s.swap.follow(mark)
