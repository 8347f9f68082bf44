"""``sync``: make this machine's builds a lock file's. Installs what is missing through the
ordinary install path, held to the lock's SHA-256 and exact distributions, activates the
locked builds and optionally removes the rest."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING

import anyio

from ..api_models import SyncResult
from ..config.models import Settings
from ..errors import BackendmgrError, ConfigError, Refused
from ..events import EventSink, for_build
from ..immutable import frozen
from ..install.store import InstalledEntry
from ..lockfile import GithubLock, LockedBuild, LockFile, PypiLock, read_lock, same_build
from ..requests import ActivateRequest, InstallRequest, SyncRequest, UninstallRequest
from .activate import Activation
from .facts import activated_id, pinned_by
from .generate import Generator
from .install import Installer, Locked
from .lock import Locks
from .uninstall import Uninstaller

if TYPE_CHECKING:
    from ..catalog.manifest import Manifest
    from ..install.builds import BuildStore

__all__ = ["Syncer"]


@frozen
class Syncer:
    builds: BuildStore
    settings: Callable[[], Awaitable[Settings]]
    manifest: Callable[[str], Manifest]  # a known component's, else the unknown error
    locks: Locks
    installer: Installer
    activation: Activation
    uninstaller: Uninstaller
    generator: Generator

    def _check_sources(self, lock: LockFile) -> None:
        """Every locked build belongs to a known component with the source the lock names."""
        from ..catalog.manifest import GithubSource, source_label

        for build in lock.builds:
            manifest = self.manifest(build.component)
            source = manifest.source
            if isinstance(build.source, GithubLock):
                ok = isinstance(source, GithubSource) and source.repo == build.source.repo
                named = source_label(build.source)
            else:
                ok = not isinstance(source, GithubSource) and source.package == (
                    build.source.package
                )
                named = source_label(build.source)
                variant = manifest.variant(build.variant)
                here = (
                    getattr(source, "index_url", None),
                    list(variant.pip_args) if variant else [],
                )
                if ok and here != (build.source.index_url, build.source.pip_args):
                    raise ConfigError(
                        f"{build.id}: the lock's index settings ({build.source.index_url}, "
                        f"{build.source.pip_args}) are not the manifest's ({here[0]}, "
                        f'{here[1]}); run "backendmgr lock" again; nothing was changed'
                    )
            if not ok:
                have = source_label(source)
                raise ConfigError(
                    f"{build.id}: the lock says {named} but {build.component}'s manifest says "
                    f"{have}; nothing was changed"
                )

    @staticmethod
    def _drift(
        lock: LockFile, entries: Sequence[InstalledEntry], *, extras_allowed: bool
    ) -> list[str]:
        out = []
        for entry in entries:
            locked = lock.build(entry.id)
            if locked is None:
                if not extras_allowed:
                    out.append(f"{entry.id} is installed but not in the lock")
            elif not same_build(locked, entry):
                what = "assets" if isinstance(locked.source, GithubLock) else "packages"
                out.append(f"{entry.id} has other {what} than the lock")
        return out

    async def sync(self, req: SyncRequest, on_event: EventSink | None = None) -> SyncResult:
        """Make this machine's builds the lock's (see the module docstring)."""
        prune, force, dry_run = req.prune, req.force, req.dry_run
        path = self.locks.lock_path(req.lock)
        parsed = await anyio.to_thread.run_sync(read_lock, path)
        self._check_sources(parsed)
        entries = await anyio.to_thread.run_sync(self.builds.installed)
        settings = await self.settings()
        if req.locked:
            drift = self._drift(parsed, entries, extras_allowed=prune)
            if drift:
                more = f" (and {len(drift) - 1} more)" if len(drift) > 1 else ""
                raise Refused(
                    f"{path} is out of date for the builds installed here: {drift[0]}{more}; "
                    'run "backendmgr lock" to record them, or sync without --locked; nothing '
                    "was changed"
                )
        by_id = {e.id: e for e in entries}
        install = [b for b in parsed.builds if b.id not in by_id]
        replace = [b for b in parsed.builds if b.id in by_id and not same_build(b, by_id[b.id])]
        extras = [e for e in entries if parsed.build(e.id) is None] if prune else []
        kept = [] if force else [e for e in extras if pinned_by(settings, e.id)]
        remove = [e for e in extras if e not in kept]
        activate = self._to_activate(parsed, settings)
        plan = SyncResult(
            message=f"this machine already matches {path}; nothing to do",
            changed=False,
            lock=str(path),
            install=[b.id for b in install],
            reinstall=[b.id for b in replace],
            activate=sorted(activate.values()),
            remove=[e.id for e in remove],
            kept=[e.id for e in kept],
            dry_run=dry_run,
        )
        warnings = [
            f"kept {e.id}: pinned by {', '.join(pinned_by(settings, e.id))} (--force removes it)"
            for e in kept
        ]
        if not (install or replace or activate or remove):
            plan.warn(*warnings)
            return plan
        if dry_run:
            plan.message = _describe_plan(plan, would=True)
            return plan
        failures: dict[str, BackendmgrError] = {}

        # The lock's activated builds first, each activated as soon as it is in place; the
        # others after, never activated by their install: an interrupted sync leaves the old
        # activated build or the lock's, never another one (an older one).
        leading = set(parsed.activated.values())
        steered = set(parsed.activated)

        async def one(build: LockedBuild, reinstall: bool) -> None:
            try:
                await self.installer.install(
                    InstallRequest(
                        component=build.component,
                        version=build.version,
                        variant=build.variant,
                        reinstall=reinstall,
                        activate=build.id in leading,
                        generate=False,
                    ),
                    for_build(on_event, build.id),
                    Locked(
                        sha256={a.name: a.sha256 for a in build.assets}
                        if isinstance(build.source, GithubLock)
                        else None,
                        packages=build.pins() if isinstance(build.source, PypiLock) else None,
                    ),
                    auto_activate=build.component not in steered,
                )
            except BackendmgrError as exc:
                failures[build.id] = exc

        async def activate_locked() -> None:
            settings = await self.settings()
            for build_id in sorted(self._to_activate(parsed, settings).values()):
                if self.builds.get(*_split(parsed, build_id)) is not None:
                    await self.activation.activate(ActivateRequest(build=build_id, generate=False))

        jobs = [(b, False) for b in install] + [(b, True) for b in replace]
        try:
            await activate_locked()  # those already here, before anything else changes
            for lead in (True, False):
                async with anyio.create_task_group() as tg:
                    for build, reinstall in jobs:
                        if (build.id in leading) == lead:
                            tg.start_soon(one, build, reinstall)
            await activate_locked()
            removed: list[str] = []
            for component in sorted({e.receipt.component for e in remove}):
                ids = [e.id for e in remove if e.receipt.component == component]
                try:
                    await self.uninstaller.uninstall(
                        UninstallRequest.unchecked(builds=ids, force=True, generate=False)
                    )
                    removed += ids
                except Refused as exc:
                    warnings.append(f"kept {', '.join(ids)}: {exc}")
        finally:
            with anyio.CancelScope(shield=True):
                warnings += await self.generator.regenerate()
        if failures:
            build_id, first = sorted(failures.items())[0]
            more = f" ({len(failures) - 1} more failed)" if len(failures) > 1 else ""
            raise type(first)(f"{build_id}: {first}{more}")
        plan.install = [b.id for b in install]
        plan.reinstall = [b.id for b in replace]
        plan.remove = removed
        plan.failed = {}
        plan.changed = True
        plan.message = _describe_plan(plan, would=False)
        plan.warn(*warnings)
        return plan

    @staticmethod
    def _to_activate(lock: LockFile, settings: Settings) -> dict[str, str]:
        return {
            component: build_id
            for component, build_id in lock.activated.items()
            if activated_id(settings, component) != build_id
        }


def _split(lock: LockFile, build_id: str) -> tuple[str, str, str]:
    build = lock.build(build_id)
    assert build is not None
    return build.component, build.version, build.variant


def _describe_plan(plan: SyncResult, *, would: bool) -> str:
    verbs = (
        ("install", "would install" if would else "installed"),
        ("reinstall", "would reinstall" if would else "reinstalled"),
        ("activate", "would activate" if would else "activated"),
        ("remove", "would remove" if would else "removed"),
    )
    parts = [f"{verb} {', '.join(getattr(plan, key))}" for key, verb in verbs if getattr(plan, key)]
    head = f"synced with {plan.lock}" if not would else f"sync with {plan.lock}"
    return f"{head}: {'; '.join(parts) or 'nothing changed'}"
