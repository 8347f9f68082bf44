"""``lock``, ``sync`` and ``fetch``: the same builds, byte for byte, on every machine.

``lock`` records the installed builds (receipts) and the activated one per component;
``sync`` installs what is missing through the ordinary install path, held to the lock's
SHA-256 and exact distributions, activates the locked builds and optionally prunes the rest;
``fetch`` lays out every locked asset as :mod:`backendmgr.mirror` serves it, for sites
without a network.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio

from .._fs import atomic_write_bytes
from ..api_models import FetchResult, LockResult, SyncResult
from ..config.models import Settings
from ..errors import BackendmgrError, ConfigError, NetworkError, Refused
from ..install.events import EventSink, for_build
from ..install.store import InstalledEntry
from ..lockfile import (
    LOCK_NAME,
    GithubLock,
    LockedAsset,
    LockedBuild,
    LockFile,
    PypiLock,
    lock_from_entries,
    locked_entry,
    read_lock,
    same_build,
    write_lock,
)
from ._maintenance import MaintenanceMixin, activated_id

__all__ = ["LockMixin"]

FETCH_CONCURRENCY = 4


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


class LockMixin(MaintenanceMixin):
    def lock_path(self, path: str | os.PathLike[str] | None = None) -> Path:
        """The lock named, else ``backendmgr.lock`` beside the config file."""
        if path is not None:
            return Path(path).expanduser().absolute()
        return self.paths.config_dir / LOCK_NAME

    async def current_lock(self) -> LockFile:
        """This machine's builds as a lock: every receipt, and the activated build of each."""
        from ..catalog.manifest import PypiSource

        settings = await self.settings()
        entries = await anyio.to_thread.run_sync(self.builds.installed)
        builds = []
        for entry in entries:
            pypi: PypiLock | None = None
            manifest = self.catalog.get(entry.receipt.component)
            if manifest is not None and isinstance(manifest.source, PypiSource):
                variant = manifest.variant(entry.receipt.variant)
                pypi = PypiLock(
                    type="pypi",
                    package=manifest.source.package,
                    index_url=manifest.source.index_url,
                    pip_args=list(variant.pip_args) if variant else [],
                )
            builds.append(locked_entry(entry, pypi))
        ids = {e.id for e in entries}
        activated = {}
        for component in sorted({e.receipt.component for e in entries}):
            active = activated_id(settings, component)
            if active in ids:
                activated[component] = active
        return lock_from_entries(builds, activated)

    # --- lock -----------------------------------------------------------------------------

    async def lock(
        self, output: str | os.PathLike[str] | None = None, *, fetch: str | None = None
    ) -> LockResult:
        """Write the lock of this machine's builds; with ``fetch``, download its assets too."""
        path = self.lock_path(output)
        lock = await self.current_lock()
        changed = await anyio.to_thread.run_sync(write_lock, path, lock)
        ids = [b.id for b in lock.builds]
        head = (
            f"wrote {path} ({_plural(len(ids), 'build')})"
            if changed
            else f"{path} is up to date ({_plural(len(ids), 'build')})"
        )
        result = LockResult(
            message=head,
            changed=changed,
            warnings=[] if ids else ["no builds are installed; the lock lists none"],
            path=str(path),
            builds=ids,
            activated=dict(lock.activated),
        )
        if fetch is not None:
            result.fetch = await self._fetch_lock(lock, Path(fetch).expanduser().absolute())
            result.message += f"; {result.fetch.message}"
        return result

    # --- fetch ----------------------------------------------------------------------------

    async def fetch(
        self, dest: str | os.PathLike[str], lock: str | os.PathLike[str] | None = None
    ) -> FetchResult:
        """Download every archive asset of a lock into ``dest``, laid out for the mirror."""
        path = self.lock_path(lock)
        parsed = await anyio.to_thread.run_sync(read_lock, path)
        return await self._fetch_lock(parsed, Path(dest).expanduser().absolute())

    async def _fetch_lock(self, lock: LockFile, dest: Path) -> FetchResult:
        from ..install.download import discard, download
        from ..install.locked import verify_locked
        from ..install.verify import verify
        from ..sources.models import ReleaseAsset

        wanted: list[tuple[GithubLock, LockedAsset]] = [
            (b.source, a) for b in lock.builds if isinstance(b.source, GithubLock) for a in b.assets
        ]
        fetched: list[str] = []
        present: list[str] = []
        limiter = anyio.CapacityLimiter(FETCH_CONCURRENCY)

        def where(source: GithubLock, asset: LockedAsset) -> Path:
            owner, repo = source.repo.split("/")
            return dest / owner / repo / source.tag / asset.name

        def already(final: Path, asset: LockedAsset) -> bool:
            return (
                final.is_file()
                and final.stat().st_size == asset.size
                and _file_sha256(final) == asset.sha256
            )

        async def one(source: GithubLock, locked: LockedAsset, client: Any) -> None:
            final = where(source, locked)
            label = f"{source.repo}/{source.tag}/{locked.name}"
            async with limiter:
                if await anyio.to_thread.run_sync(already, final, locked):
                    present.append(label)
                    return
                asset = ReleaseAsset(
                    name=locked.name,
                    url=locked.url,
                    size=locked.size,
                    digest=f"sha256:{locked.sha256}",
                )
                partial = final.parent / ".partial"
                try:
                    got = await download(
                        client, self.net, asset, partial, backoff=self.retry_backoff
                    )
                    verify(asset, got)
                    verify_locked(asset, got, locked.sha256)
                    os.replace(got.path, final)
                    discard(got.path)  # its resume note
                except Exception as exc:  # refused: keep nothing; a cut network resumes
                    if not isinstance(exc, NetworkError):
                        shutil.rmtree(partial, ignore_errors=True)
                    raise
                with_meta = final.parent / ".release.json"
                if not with_meta.exists():
                    meta = {"name": source.tag, "prerelease": False}
                    atomic_write_bytes(with_meta, json.dumps(meta).encode())
                shutil.rmtree(partial, ignore_errors=True)
                fetched.append(label)

        if wanted:
            dest.mkdir(parents=True, exist_ok=True)
            async with self._github() as gh:
                try:
                    async with anyio.create_task_group() as tg:
                        for source, asset in wanted:
                            tg.start_soon(one, source, asset, gh.client)
                except BaseExceptionGroup as group:
                    from ..install.archive_job import first_error

                    raise first_error(group) from None
        message = (
            f"fetched {_plural(len(fetched), 'asset')} into {dest}"
            + (f" ({len(present)} already there)" if present else "")
            + (
                f'; serve it with "scripts/mirror.py {dest}" and sync with '
                "BACKENDMGR_GITHUB_API set to its address"
                if wanted
                else ""
            )
        )
        if not wanted:
            message = "the lock lists no archive builds; nothing to fetch"
        return FetchResult(
            message=message,
            changed=bool(fetched),
            dir=str(dest),
            fetched=sorted(fetched),
            present=sorted(present),
        )

    # --- sync -----------------------------------------------------------------------------

    def _check_sources(self, lock: LockFile) -> None:
        """Every locked build belongs to a known component with the source the lock names."""
        from ..catalog.manifest import GithubSource

        for build in lock.builds:
            manifest = self.manifest(build.component)
            source = manifest.source
            if isinstance(build.source, GithubLock):
                ok = isinstance(source, GithubSource) and source.repo == build.source.repo
                named = f"github:{build.source.repo}"
            else:
                ok = not isinstance(source, GithubSource) and source.package == (
                    build.source.package
                )
                named = f"pypi:{build.source.package}"
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
                have = (
                    f"github:{source.repo}"
                    if isinstance(source, GithubSource)
                    else f"pypi:{source.package}"
                )
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

    async def sync(
        self,
        lock: str | os.PathLike[str] | None = None,
        *,
        locked: bool = False,
        prune: bool = False,
        force: bool = False,
        dry_run: bool = False,
        on_event: EventSink | None = None,
    ) -> SyncResult:
        """Make this machine's builds the lock's (see the module docstring)."""
        path = self.lock_path(lock)
        parsed = await anyio.to_thread.run_sync(read_lock, path)
        self._check_sources(parsed)
        entries = await anyio.to_thread.run_sync(self.builds.installed)
        settings = await self.settings()
        if locked:
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
        kept = [] if force else [e for e in extras if self._pinned(settings, e.id)]
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
            f"kept {e.id}: pinned by {', '.join(self._pinned(settings, e.id))} (--force removes it)"
            for e in kept
        ]
        if not (install or replace or activate or remove):
            plan.warn(*warnings)
            return plan
        if dry_run:
            plan.message = _describe_plan(plan, would=True)
            return plan
        failures: dict[str, BackendmgrError] = {}

        async def one(build: LockedBuild, reinstall: bool) -> None:
            try:
                await self.install(
                    build.component,
                    build.version,
                    variant=build.variant,
                    reinstall=reinstall,
                    generate=False,
                    on_event=for_build(on_event, build.id),
                    expected_sha256={a.name: a.sha256 for a in build.assets}
                    if isinstance(build.source, GithubLock)
                    else None,
                    locked_packages=build.pins() if isinstance(build.source, PypiLock) else None,
                )
            except BackendmgrError as exc:
                failures[build.id] = exc

        try:
            async with anyio.create_task_group() as tg:
                for build in install:
                    tg.start_soon(one, build, False)
                for build in replace:
                    tg.start_soon(one, build, True)
            settings = await self.settings()
            for build_id in sorted(self._to_activate(parsed, settings).values()):
                if self.builds.get(*_split(parsed, build_id)) is not None:
                    await self.activate(build_id, generate=False)
            removed: list[str] = []
            for component in sorted({e.receipt.component for e in remove}):
                ids = [e.id for e in remove if e.receipt.component == component]
                try:
                    await self.uninstall(ids, force=True, generate=False)
                    removed += ids
                except Refused as exc:
                    warnings.append(f"kept {', '.join(ids)}: {exc}")
        finally:
            with anyio.CancelScope(shield=True):
                warnings += await self.regenerate()
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
    def _pinned(settings: Settings, build_id: str) -> list[str]:
        return sorted(m for m, ov in settings.models.items() if ov.backend == build_id)

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
