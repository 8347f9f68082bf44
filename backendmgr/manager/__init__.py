"""The async service layer: every operation the CLI and the HTTP API can ask for.

:class:`Manager` is a thin façade over plain services, each in the module named for what it
does (``install``, ``activate``, ``uninstall``, ``verify``, ``lock`` …) and each given its
collaborators when it is made; :mod:`.context` holds what they share and :mod:`.facts` the
small facts several of them ask for. Operations with options take one request from
:mod:`backendmgr.requests` (the keyword forms of before still work).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Unpack

from ..requests import (
    ActivateRequest,
    AddBackendRequest,
    CacheCleanRequest,
    CanaryRequest,
    DoctorRequest,
    GenerateRequest,
    InstallRequest,
    PruneRequest,
    ReleasesQuery,
    SyncRequest,
    UninstallRequest,
    UpdateRequest,
    VerifyRequest,
)
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
        VerifyResult,
        WhichResult,
    )
    from ..catalog.capabilities import Capabilities
    from ..catalog.host import Host
    from ..catalog.manifest import Catalog, Manifest
    from ..config.models import BackendRow, Settings
    from ..config.paths import Paths
    from ..events import EventSink
    from ..lockfile import LockFile
    from .bench import BenchService, OnRun
    from .measure import MeasureService
    from .services import Services
    from .swap import SwapService
    from .verify import OnJobEvent, OnResult, OnStart

__all__ = ["SETTABLE_KEYS", "Manager"]

PathArg = str | os.PathLike[str] | None


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

    @property
    def card_gb(self) -> float | None:
        return self.ctx.card_gb

    def manifest(self, component: str) -> Manifest:
        return self.ctx.manifest(component)

    async def settings(self) -> Settings:
        return await self.ctx.settings()

    async def backends(self) -> list[BackendRow]:
        return list((await self.ctx.settings()).backends)

    # --- components and builds -------------------------------------------------------------

    async def catalog_info(self) -> list[CatalogEntry]:
        return await self._s.releases.catalog()

    async def releases(
        self,
        query: ReleasesQuery | str,
        *,
        variant: str | None = None,
        refresh: bool = False,
        limit: int = 10,
        platform: str | None = None,
    ) -> list[ReleaseInfo]:
        if isinstance(query, str):
            query = ReleasesQuery.of(
                component=query, variant=variant, refresh=refresh, limit=limit, platform=platform
            )
        return await self._s.releases.recent(query)

    async def install(
        self,
        request: InstallRequest | str,
        version: str | None = None,
        *,
        on_event: EventSink | None = None,
        expected_sha256: Mapping[str, str] | None = None,
        locked_packages: Mapping[str, str] | None = None,
        **options: object,
    ) -> InstallResult:
        """Install one build (SPEC §7); the newest release with this variant when no version.

        ``expected_sha256`` and ``locked_packages`` hold it to a lock file (``sync``): the
        assets' SHA-256 by name, or every distribution of the venv by name. ``on_event`` sees
        the phases in order and then exactly one terminal event: ``done``, ``failed`` (its
        message is the error's) or ``cancelled`` (the task was cancelled).
        """
        from .install import Locked

        if isinstance(request, str):
            request = InstallRequest.of(component=request, version=version, **options)
        locked = Locked(sha256=expected_sha256, packages=locked_packages)
        return await self._s.installer.install(request, on_event, locked)

    async def activate(
        self,
        ref: str | ActivateRequest,
        *,
        generate: bool = True,
        dry_run: bool = False,
        force: bool = False,
    ) -> ActivateResult:
        """Switch the activated build; refused when a model following it uses a flag the build
        does not list (issue 32), unless ``force``."""
        from .facts import find_build
        from .flags import check_switch, followers

        if isinstance(ref, str):
            ref = ActivateRequest.of(build=ref, generate=generate, dry_run=dry_run, force=force)
        entry = find_build(self.builds, ref.build)
        plan = await self._s.models.plan()
        models = followers(plan, entry.receipt.component)
        kept = check_switch(plan.settings, models, entry, force=ref.force)
        result = await self._s.activation.activate(ref)
        return result.model_copy(update={"warnings": [*kept, *result.warnings]}) if kept else result

    async def canary(self, request: CanaryRequest, *, on_run: OnRun | None = None) -> CanaryReport:
        """``activate BUILD --canary MODEL…`` (issue 32): only the canaries move first; every
        one healthy and within the tolerance promotes the build, anything else rolls back."""
        from .canary import canary

        return await canary(self, request, on_run=on_run)

    async def uninstall(
        self,
        ref: UninstallRequest | str | Sequence[str],
        *,
        force: bool = False,
        generate: bool = True,
        dry_run: bool = False,
    ) -> UninstallResult:
        """Remove one or more builds; every one is checked first, so none or all go (§9)."""
        if not isinstance(ref, UninstallRequest):
            refs = [ref] if isinstance(ref, str) else list(ref)
            if not refs:
                from ..errors import InvalidInput

                raise InvalidInput("name at least one build to uninstall")
            ref = UninstallRequest.of(builds=refs, force=force, generate=generate, dry_run=dry_run)
        return await self._s.uninstaller.uninstall(ref)

    async def list_builds(self, component: str | None = None) -> list[BuildInfo]:
        return await self._s.inventory.builds(component)

    async def backends_info(self, *, probe: bool = True) -> list[BackendRowInfo]:
        """Each registry row with its classes and (``probe``) capabilities."""
        return await self._s.inventory.backends(probe=probe)

    async def backend_capabilities(self) -> dict[str, Capabilities | None]:
        return await self._s.inventory.capabilities()

    async def doctor(
        self, request: DoctorRequest | None = None, *, fix: bool = False
    ) -> DoctorReport:
        return await self._s.doctor.check(request or DoctorRequest(fix=fix))

    async def sync_registry(self) -> bool:
        return await self._s.generator.sync_registry()

    # --- upkeep ----------------------------------------------------------------------------

    async def update(
        self,
        request: UpdateRequest | Sequence[str] = (),
        *,
        dry_run: bool = False,
        on_event: EventSink | None = None,
        generate: bool = True,
    ) -> UpdateResult:
        if not isinstance(request, UpdateRequest):
            request = UpdateRequest.of(components=list(request), dry_run=dry_run, generate=generate)
        return await self._s.maintenance.update(request, on_event)

    async def prune(
        self,
        request: PruneRequest | str | None = None,
        *,
        keep: int = 1,
        dry_run: bool = False,
        generate: bool = True,
    ) -> PruneResult:
        if not isinstance(request, PruneRequest):
            request = PruneRequest.of(
                component=request, keep=keep, dry_run=dry_run, generate=generate
            )
        return await self._s.maintenance.prune(request)

    async def cache_clean(
        self, request: CacheCleanRequest | None = None, *, dry_run: bool = False
    ) -> CacheCleanResult:
        return await self._s.maintenance.cache_clean(request or CacheCleanRequest(dry_run=dry_run))

    async def which(self, target: str) -> WhichResult:
        return await self._s.which.which(target)

    def local_names(self, kind: str) -> list[str]:
        return self._s.which.local_names(kind)

    async def config_info(self) -> ConfigInfo:
        return await self._s.which.config_info()

    # --- registry and overrides --------------------------------------------------------------

    async def add_backend(
        self, request: AddBackendRequest | str, **options: object
    ) -> BackendRowResult:
        """Append a manual row (``options``: the request's fields but ``id``, when ``request``
        is the row id); a path that is missing or not executable needs ``force``."""
        if isinstance(request, str):
            request = AddBackendRequest.of(id=request, **options)
        return await self._s.registry.add_backend(request)

    async def remove_backend(self, row_id: str, *, generate: bool = True) -> RemovedRow:
        return await self._s.registry.remove_backend(row_id, generate=generate)

    async def set_default(self, row_id: str, *, generate: bool = True) -> BackendRowResult:
        return await self._s.registry.set_default(row_id, generate=generate)

    # ``dry_run``: the same path stopped before the write; ``changed`` and ``diff`` say what
    # the real run would do (issue 29)
    async def pin(
        self,
        model: str,
        row_id: str,
        *,
        generate: bool = True,
        dry_run: bool = False,
        force: bool = False,
    ) -> PinResult:
        """Pin ``model`` to ``row_id``; a build that does not list a flag of the model's
        ``extra_args`` refuses it (issue 32), unless ``force``."""
        from .flags import check_switch, pin_target

        settings = await self.settings()
        entry = pin_target(settings, self.builds, row_id)
        kept = check_switch(settings, [model], entry, force=force) if entry else []
        result = await self._s.registry.pin(model, row_id, generate=generate, dry_run=dry_run)
        return result.model_copy(update={"warnings": [*kept, *result.warnings]}) if kept else result

    async def unpin(self, model: str, *, generate: bool = True, dry_run: bool = False) -> PinResult:
        from .flags import unpin_lines

        kept = await unpin_lines(self, model)  # the build it then runs may lack a flag
        result = await self._s.registry.unpin(model, generate=generate, dry_run=dry_run)
        return result.model_copy(update={"warnings": [*kept, *result.warnings]}) if kept else result

    async def set_overrides(
        self,
        model: str,
        values: Mapping[str, str],
        *,
        generate: bool = True,
        dry_run: bool = False,
    ) -> ModelSettingsResult:
        return await self._s.registry.set_overrides(
            model, values, generate=generate, dry_run=dry_run
        )

    async def unset_overrides(
        self, model: str, keys: Sequence[str], *, generate: bool = True, dry_run: bool = False
    ) -> ModelSettingsResult:
        return await self._s.registry.unset_overrides(
            model, keys, generate=generate, dry_run=dry_run
        )

    # --- models and the generated config ---------------------------------------------------

    async def models_dir(
        self, path: str, *, add: bool, generate: bool = True, dry_run: bool = False
    ) -> ModelsDirResult:
        """Add a folder to ``models_dirs``, or remove one (``add=False``)."""
        return await self._s.registry.models_dir(path, add=add, generate=generate, dry_run=dry_run)

    async def models_info(self) -> list[ModelInfo]:
        return await self._s.models.info()

    async def folder_problems(self) -> list[str]:
        return await self._s.models.folder_problems()

    async def cmd(self, model_id: str) -> CmdResult:
        return await self._s.models.cmd(model_id)

    async def generate(
        self,
        request: GenerateRequest | None = None,
        *,
        output: str | None = None,
        force: bool = False,
        check: bool = False,
    ) -> GenerateResult:
        """Rewrite the llama-swap config when its inputs changed (``force``: always)."""
        return await self._s.generator.generate(
            request or GenerateRequest.of(output=output, force=force, check=check)
        )

    async def generated(self) -> GeneratedText:
        return await self._s.generator.generated()

    async def regenerate(self) -> list[str]:
        return await self._s.generator.regenerate()

    async def verify(
        self,
        request: VerifyRequest | list[str] | None = None,
        *,
        timeout: float | None = None,
        keep_going: bool = False,
        on_result: OnResult | None = None,
        on_start: OnStart | None = None,
        on_event: OnJobEvent | None = None,
    ) -> list[VerifyResult]:
        """Check each named model (all emitted ones when none): one result per model run;
        ``on_event`` hears typed job events (``verifying``, then ``verified`` with the result)."""
        if not isinstance(request, VerifyRequest):
            request = VerifyRequest.of(
                models=list(request or []), timeout=timeout, keep_going=keep_going
            )
        return (await self._s.verifier.report(request, on_result, on_start, on_event)).results

    async def verify_report(
        self,
        request: VerifyRequest,
        *,
        on_result: OnResult | None = None,
        on_event: OnJobEvent | None = None,
    ) -> VerifyReport:
        """:meth:`verify` as the CLI and the API report it: the results, how many failed, and
        the models a stop at the first failure left unchecked."""
        return await self._s.verifier.report(request, on_result, None, on_event)

    # --- lock files ------------------------------------------------------------------------

    def lock_path(self, path: PathArg = None) -> Path:
        return self._s.locks.lock_path(path)

    async def current_lock(self) -> LockFile:
        return await self._s.locks.current_lock()

    async def lock(self, output: PathArg = None, *, fetch: str | None = None) -> LockResult:
        return await self._s.locks.lock(output, fetch=fetch)

    async def fetch(self, dest: str | os.PathLike[str], lock: PathArg = None) -> FetchResult:
        return await self._s.locks.fetch(dest, lock)

    async def sync(
        self,
        request: SyncRequest | PathArg = None,
        *,
        locked: bool = False,
        prune: bool = False,
        force: bool = False,
        dry_run: bool = False,
        on_event: EventSink | None = None,
    ) -> SyncResult:
        if not isinstance(request, SyncRequest):
            request = SyncRequest.of(
                lock=None if request is None else os.fspath(request),
                locked=locked,
                prune=prune,
                force=force,
                dry_run=dry_run,
            )
        return await self._s.syncer.sync(request, on_event)
