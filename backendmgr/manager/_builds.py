"""Builds: ``catalog``, ``releases``, ``install`` (archives and venvs), ``activate``,
``uninstall``, ``list`` and ``doctor``. The steps themselves live in :mod:`backendmgr.install`."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from ..api_models import (
    ActivateResult,
    AssetInfo,
    BackendRowInfo,
    BuildInfo,
    CatalogEntry,
    DoctorReport,
    InstallResult,
    ReleaseInfo,
)
from ..catalog.capabilities import Capabilities, missing_gpu
from ..config.models import ModelOverride, Settings
from ..errors import InvalidInput, NotFound, unknown
from ..install.events import EventSink, ProgressEvent
from ..install.store import InstalledEntry
from ..registry import rows as registry
from ..registry.kinds import classes_of
from ..registry.resolve import resolve
from ..units import format_size

if TYPE_CHECKING:
    from ..catalog.manifest import Manifest
    from ..catalog.matching import AssetChoice
    from ..sources.github import GithubReleases

from ._base import ManagerBase

__all__ = ["BuildsMixin"]


class BuildsMixin(ManagerBase):
    async def catalog_info(self) -> list[CatalogEntry]:
        from ..catalog.manifest import GithubSource
        from ..catalog.matching import suggest_variant

        settings = await self.settings()
        installed = self.builds.installed()
        out = []
        for m in self.catalog:
            suggested, why = suggest_variant(m, self.host)
            managed = settings.row(m.id)
            activated = (
                registry.build_row_id(m.id, managed.version, managed.variant)
                if managed is not None and managed.managed and managed.version
                else None
            )
            source = m.source
            out.append(
                CatalogEntry.model_validate(
                    {
                        "id": m.id,
                        "name": m.name,
                        "kind": m.kind,
                        "source": f"github:{source.repo}"
                        if isinstance(source, GithubSource)
                        else f"pypi:{source.package}",
                        "variants": [
                            {"id": v.id, "available": v.available_on(self.host.platform)}
                            for v in m.variants
                        ],
                        "suggested": suggested,
                        "why": why,
                        "installed": [e.id for e in installed if e.receipt.component == m.id],
                        "activated": activated,
                    }
                )
            )
        return out

    async def releases(
        self,
        component: str,
        *,
        variant: str | None = None,
        refresh: bool = False,
        limit: int = 10,
        platform: str | None = None,
    ) -> list[ReleaseInfo]:
        from ..catalog.manifest import GithubSource
        from ..catalog.matching import unknown_variant, variants_in_release

        manifest = self.manifest(component)
        os_name, arch = self._platform(platform)
        plat = f"{os_name}-{arch}"
        if variant is not None and manifest.variant(variant) is None:
            raise unknown_variant(manifest, variant)
        source = manifest.source
        marks = await self._release_marks(component)
        if not isinstance(source, GithubSource):
            versions = await self._pypi_versions(manifest, prereleases=manifest.allow_prerelease)
            here = [v.id for v in manifest.variants_on(plat)]
            if variant is not None and variant not in here:
                return []
            return [
                ReleaseInfo.model_validate(
                    {
                        "tag": str(v),
                        "published_at": None,
                        "prerelease": v.is_prerelease,
                        "variants": here,
                        **marks(str(v)),
                    }
                )
                for v in versions[:limit]
            ]
        async with self._github() as gh:
            listed = await gh.releases(source.repo, refresh=refresh)
        out = []
        for rel in listed:
            ships = variants_in_release(manifest, rel, plat)
            if variant is not None and variant not in ships:
                continue
            out.append(
                ReleaseInfo.model_validate(
                    {
                        "tag": rel.tag,
                        "published_at": rel.published_at.isoformat() if rel.published_at else None,
                        "prerelease": rel.prerelease,
                        "variants": ships,
                        **marks(rel.tag),
                    }
                )
            )
            if len(out) >= limit:
                break
        return out

    async def _release_marks(self, component: str) -> Callable[[str], dict[str, Any]]:
        """For a version: which of its variants are installed, and which one is activated."""
        settings = await self.settings()
        managed = settings.row(component)
        entries = self.builds.installed(component)

        def marks(version: str) -> dict[str, Any]:
            activated = (
                managed.variant
                if managed is not None and managed.managed and managed.version == version
                else None
            )
            installed = sorted(e.receipt.variant for e in entries if e.receipt.version == version)
            return {"installed": installed, "activated": activated}

        return marks

    async def _choose(
        self,
        gh: GithubReleases,
        manifest: Manifest,
        variant: str,
        plat: str,
        version: str | None,
        refresh: bool,
    ) -> AssetChoice:
        from ..catalog.manifest import GithubSource
        from ..catalog.matching import match_release, unknown_variant

        source = manifest.source
        assert isinstance(source, GithubSource)
        known = manifest.variant(variant)
        if known is None:
            raise unknown_variant(manifest, variant)
        if not known.assets.get(plat):
            raise NotFound(f"no {variant} build of {manifest.id} is published for {plat}")
        driver = self.host.nvidia_driver
        listed = await gh.releases(source.repo, refresh=refresh)
        if version is not None:
            release = next((r for r in listed if r.tag == version), None)
            if release is None:
                release = await gh.release_by_tag(source.repo, version)
            return match_release(manifest, variant, release, plat, cuda_driver=driver)
        stable = [r for r in listed if manifest.allow_prerelease or not r.prerelease]
        pre = [r for r in listed if r.prerelease and not manifest.allow_prerelease]
        for group in (stable, pre):
            for release in group:
                with contextlib.suppress(NotFound):
                    return match_release(manifest, variant, release, plat, cuda_driver=driver)
        raise NotFound(f"no release of {source.repo} has a {variant} build for {plat}")

    async def install(
        self,
        component: str,
        version: str | None = None,
        *,
        variant: str | None = None,
        activate: bool = False,
        reinstall: bool = False,
        require_checksum: bool = False,
        smoke: bool = True,
        dry_run: bool = False,
        platform: str | None = None,
        refresh: bool = False,
        on_event: EventSink | None = None,
        generate: bool = True,
        expected_sha256: Mapping[str, str] | None = None,
        locked_packages: Mapping[str, str] | None = None,
    ) -> InstallResult:
        """Install one build (SPEC §7); the newest release with this variant when no version.

        ``expected_sha256`` and ``locked_packages`` hold it to a lock file (``sync``): the
        assets' SHA-256 by name, or every distribution of the venv by name.

        ``on_event`` sees the phases in order and then exactly one terminal event: ``done``,
        ``failed`` (its message is the error's) or ``cancelled`` (the task was cancelled).
        """
        emit = on_event or (lambda event: None)
        try:
            outcome = await self._install(
                component,
                version,
                variant=variant,
                activate=activate,
                reinstall=reinstall,
                require_checksum=require_checksum,
                smoke=smoke,
                dry_run=dry_run,
                platform=platform,
                refresh=refresh,
                emit=emit,
                generate=generate,
                expected_sha256=expected_sha256,
                locked_packages=locked_packages,
            )
        except (anyio.get_cancelled_exc_class(), KeyboardInterrupt):
            emit(ProgressEvent("cancelled"))
            raise
        except BaseException as exc:
            while isinstance(exc, BaseExceptionGroup):
                exc = exc.exceptions[0]
            emit(ProgressEvent("failed", message=str(exc) or type(exc).__name__))
            raise
        emit(ProgressEvent("done"))
        return outcome

    async def _install(
        self,
        component: str,
        version: str | None,
        *,
        variant: str | None,
        activate: bool,
        reinstall: bool,
        require_checksum: bool,
        smoke: bool,
        dry_run: bool,
        platform: str | None,
        refresh: bool,
        emit: EventSink,
        generate: bool,
        expected_sha256: Mapping[str, str] | None = None,
        locked_packages: Mapping[str, str] | None = None,
    ) -> InstallResult:
        from ..catalog.manifest import GithubSource
        from ..catalog.matching import suggest_variant
        from ..install.archive_job import ArchivePlan, install_archive

        manifest = self.manifest(component)
        if platform is not None and not dry_run:
            raise InvalidInput("--platform describes another machine; use it with --dry-run")
        os_name, arch = self._platform(platform)
        plat = f"{os_name}-{arch}"
        variant = variant or suggest_variant(manifest, self.host, plat)[0]
        if not variant:
            raise NotFound(f"{component} publishes nothing for {plat}")
        if not isinstance(manifest.source, GithubSource):
            return await self._install_venv(
                manifest,
                version,
                variant,
                plat,
                activate=activate,
                reinstall=reinstall,
                smoke=smoke,
                dry_run=dry_run,
                emit=emit,
                generate=generate,
                locked_packages=locked_packages,
            )
        emit(ProgressEvent("resolving", message=f"{component} {version or 'latest'} {variant}"))
        settings = await self.settings()
        require_checksum = require_checksum or settings.require_checksum
        async with self._github() as gh:
            choice = await self._choose(gh, manifest, variant, plat, version, refresh)
            target = self.builds.build_dir(component, choice.release.tag, variant)
            plan = ArchivePlan(manifest, choice, os_name, target)
            build_id = registry.build_row_id(component, plan.version, variant)
            if dry_run:
                exe = target / manifest.exe_for(os_name)
                installed = self.builds.get(component, plan.version, variant) is not None
                lines = [_dry_run_head(build_id, target, installed)]
                lines += [
                    f"  {a.name}  {_shown_size(a.size)}  {a.url}  sha256:{a.sha256}"
                    for a in choice.assets
                ]
                return InstallResult(
                    message="\n".join(lines),
                    changed=False,
                    id=build_id,
                    component=component,
                    version=plan.version,
                    variant=variant,
                    path=str(exe),
                    dir=str(target),
                    release=choice.release.tag,
                    activated=False,
                    already_installed=installed,
                    assets=[
                        AssetInfo(
                            name=a.name,
                            url=a.url,
                            size=a.size,
                            sha256=a.sha256,
                            verified_by="digest" if a.sha256 else None,
                        )
                        for a in choice.assets
                    ],
                    dry_run=True,
                )
            present = self.builds.get(component, plan.version, variant) is not None
            waiting = self._on_lock_wait(build_id, emit)
            async with self._build_lock(component, plan.version, variant, waiting) as waited:
                existing = self.builds.get(component, plan.version, variant)
                already = existing is not None and (not reinstall or waited)
                by_other = already and waited and not present
                if not already:
                    await install_archive(
                        plan,
                        self.builds,
                        gh.client,
                        self.net,
                        emit=emit,
                        require_checksum=require_checksum,
                        smoke=smoke,
                        backoff=self.retry_backoff,
                        max_unpacked=int(settings.max_unpacked_gb * (1 << 30)),
                        expected_sha256=expected_sha256,
                    )
                entry = self.builds.get(component, plan.version, variant)
                assert entry is not None
        outcome = await self._finish_install(
            manifest,
            entry,
            already=already,
            by_other=by_other,
            activate=activate,
            generate=generate,
            emit=emit,
        )
        if any(a.verified_by == "none" for a in entry.receipt.assets) and not already:
            outcome.warn("no checksum was published for this build; recorded its SHA-256 only")
        return outcome

    async def _pypi_versions(self, manifest: Manifest, *, prereleases: bool) -> list[Any]:
        from ..catalog.manifest import PypiSource
        from ..sources.pypi import package_versions

        source = manifest.source
        assert isinstance(source, PypiSource)
        return await anyio.to_thread.run_sync(
            lambda: package_versions(
                source.package,
                index_url=source.index_url,
                prereleases=prereleases,
                offline=self.net.offline,
                environ=self.environ,
            )
        )

    async def _install_venv(
        self,
        manifest: Manifest,
        version: str | None,
        variant: str,
        plat: str,
        *,
        activate: bool,
        reinstall: bool,
        smoke: bool,
        dry_run: bool,
        emit: EventSink,
        generate: bool,
        locked_packages: Mapping[str, str] | None = None,
    ) -> InstallResult:
        """A Python-packaged backend: one virtual environment per version and variant."""
        from packaging.version import InvalidVersion, Version

        from ..catalog.matching import unknown_variant
        from ..install.venv_job import VenvPlan, find_uv, install_venv, pip_options

        chosen = manifest.variant(variant)
        if chosen is None:
            raise unknown_variant(manifest, variant)
        if not chosen.available_on(plat):
            raise NotFound(f"no {variant} build of {manifest.id} is published for {plat}")
        emit(ProgressEvent("resolving", message=f"{manifest.id} {version or 'latest'} {variant}"))
        wanted: Version | None = None
        if version is not None:
            try:
                wanted = Version(version)
            except InvalidVersion as exc:
                raise InvalidInput(f'"{version}" is not a version number') from exc
        versions = await self._pypi_versions(
            manifest, prereleases=manifest.allow_prerelease or bool(wanted and wanted.is_prerelease)
        )
        if wanted is None:
            if not versions:
                raise NotFound(f"no released versions of {manifest.id} were found")
            wanted = versions[0]
        elif wanted not in versions:
            shown = ", ".join(str(v) for v in versions[:10]) or "none"
            raise NotFound(f"{manifest.id} {version} does not exist; available: {shown}")
        ver = str(wanted)
        target = self.builds.build_dir(manifest.id, ver, variant)
        uv = find_uv(self.environ)
        pins = tuple(sorted((locked_packages or {}).items()))
        plan = VenvPlan(manifest, ver, variant, target, uv, tuple(chosen.pip_args), pins)
        build_id = registry.build_row_id(manifest.id, ver, variant)
        exe = target / manifest.exe_for(plat.split("-")[0])
        if dry_run:
            installer = "uv" if uv else "pip"
            installed = self.builds.get(manifest.id, ver, variant) is not None
            return InstallResult(
                message=f"{_dry_run_head(build_id, target, installed)}: a virtual "
                f"environment with {plan.requirement} ({installer})",
                changed=False,
                id=build_id,
                component=manifest.id,
                version=ver,
                variant=variant,
                path=str(exe),
                dir=str(target),
                activated=False,
                already_installed=installed,
                assets=[],
                dry_run=True,
                installer=installer,
                requirement=plan.requirement,
                python=manifest.python,
                pip_args=[*pip_options(self.environ), *plan.pip_args],
            )
        present = self.builds.get(manifest.id, ver, variant) is not None
        waiting = self._on_lock_wait(build_id, emit)
        async with self._build_lock(manifest.id, ver, variant, waiting) as waited:
            existing = self.builds.get(manifest.id, ver, variant)
            already = existing is not None and (not reinstall or waited)
            by_other = already and waited and not present
            if not already:
                await install_venv(plan, self.builds, environ=self.environ, emit=emit, smoke=smoke)
            entry = self.builds.get(manifest.id, ver, variant)
            assert entry is not None
        outcome = await self._finish_install(
            manifest,
            entry,
            already=already,
            by_other=by_other,
            activate=activate,
            generate=generate,
            emit=emit,
        )
        outcome.python = entry.receipt.python
        outcome.packages = entry.receipt.packages
        return outcome

    async def _finish_install(
        self,
        manifest: Manifest,
        entry: InstalledEntry,
        *,
        already: bool,
        by_other: bool = False,
        activate: bool,
        generate: bool,
        emit: EventSink,
    ) -> InstallResult:
        """Register a committed build (archive or venv), regenerate, and say what happened."""
        emit(ProgressEvent("registering"))
        with anyio.CancelScope(shield=True):  # committed: a cancel must not leave it unrecorded
            activated, star, other_star, was_active = await self._register(entry, activate=activate)
        regen = await self.regenerate() if generate else []
        receipt = entry.receipt
        if by_other:
            head = f"{entry.id} was installed by another backendmgr while this one waited"
        elif already:
            head = f"{entry.id} is already installed"
        else:
            head = f"installed {entry.id}"
        if activated and was_active:
            message = (
                f"{head}; it is the activated build" if not already else f"{head} and activated"
            )
        elif activated:
            message = f"{head} and activated it"
            if not star and other_star:
                classes = ", ".join(sorted(classes_of(manifest.kind)))
                message += f", but {other_star} is the default for class {classes}"
        else:
            message = (
                f"{head}; {manifest.id} stays on its activated build; switch with "
                f'"backendmgr activate {entry.id}"'
            )
        gpu = missing_gpu(entry.id, receipt.variant, receipt.capabilities)
        return InstallResult(
            message=message,
            changed=not (already and (was_active or not activated)),
            warnings=[gpu, *regen] if gpu and not already else regen,
            id=entry.id,
            component=manifest.id,
            version=receipt.version,
            variant=receipt.variant,
            path=str(entry.exe_path),
            activated=activated,
            already_installed=already,
            assets=[AssetInfo.model_validate(a.model_dump()) for a in receipt.assets],
            capabilities=receipt.capabilities,
        )

    @staticmethod
    def _on_lock_wait(build_id: str, emit: EventSink) -> Callable[[int | None], None]:
        """Tell the user whom an install waits for, instead of hanging silently."""

        def waiting(pid: int | None) -> None:
            who = f"another backendmgr (pid {pid})" if pid else "another backendmgr"
            emit(ProgressEvent("resolving", message=f"waiting for {who} installing {build_id}…"))

        return waiting

    async def _register(
        self, entry: InstalledEntry, *, activate: bool
    ) -> tuple[bool, bool, str | None, bool]:
        """Record the build's rows: (activated, its row has the ★, the row that has it
        otherwise, whether it was the activated build already)."""
        build = entry.as_build()

        def change(s: Settings) -> tuple[Settings, tuple[bool, bool, str | None, bool]]:
            installed = self.builds.installed_builds().get(build.component, [])
            managed = s.row(build.component)
            has_active = managed is not None and managed.managed and Path(managed.path).exists()
            is_active = (
                managed is not None
                and managed.version == build.version
                and managed.variant == build.variant
            )
            rows = list(s.backends)
            star = bool(managed and managed.default)
            do_activate = activate or not has_active or is_active
            if do_activate:
                rows, star = registry.upsert_managed(rows, build)
            rows = registry.sync_build_rows(rows, build.component, installed)
            updated = s.model_copy(update={"backends": rows})
            other = None
            for cls in sorted(classes_of(build.kind)):
                winner = resolve(updated, ModelOverride(), cls).row
                if winner is not None and winner.id != build.component:
                    other = winner.id
            return updated, (do_activate, star, other, is_active and has_active)

        return await anyio.to_thread.run_sync(self.store.update, change)

    def _find_build(self, ref: str) -> InstalledEntry:
        component, sep, rest = ref.partition("@")
        if not sep or not rest:
            raise unknown(
                f'"{ref}" is not a build',
                ref,
                [e.id for e in self.builds.installed()],
                hint='use COMPONENT@VERSION-VARIANT; see "backendmgr list"',
                always_hint=True,
                error=InvalidInput,
            )
        entries = self.builds.installed(component)
        exact = [e for e in entries if f"{e.receipt.version}-{e.receipt.variant}" == rest]
        if exact:
            return exact[0]
        by_version = [e for e in entries if e.receipt.version == rest]
        if len(by_version) == 1:
            return by_version[0]
        if len(by_version) > 1:
            names = ", ".join(e.id for e in by_version)
            raise InvalidInput(f"{ref} is ambiguous; name the variant: {names}")
        raise unknown(
            f"{ref} is not installed",
            ref,
            [e.id for e in self.builds.installed()],
            hint='see "backendmgr list"',
        )

    async def activate(self, ref: str, *, generate: bool = True) -> ActivateResult:
        entry = self._find_build(ref)
        build = entry.as_build()
        was_active = (await self._register(entry, activate=True))[3]
        regen = await self.regenerate() if generate else []
        return ActivateResult(
            message=f"{entry.id} is already the activated build"
            if was_active
            else f"activated {entry.id}; every model not pinned to a build now runs it",
            changed=not was_active,
            warnings=regen,
            id=entry.id,
            component=build.component,
            version=build.version,
            variant=build.variant,
            path=build.exe,
            activated=True,
        )

    async def list_builds(self, component: str | None = None) -> list[BuildInfo]:
        if component is not None:
            self.manifest(component)
        settings = await self.settings()
        out = []
        for e in self.builds.installed(component):
            r = e.receipt
            managed = settings.row(r.component)
            primary = r.assets[0] if r.assets else None
            out.append(
                BuildInfo.model_validate(
                    {
                        "id": e.id,
                        "component": r.component,
                        "version": r.version,
                        "variant": r.variant,
                        "activated": bool(
                            managed
                            and managed.managed
                            and managed.version == r.version
                            and managed.variant == r.variant
                        ),
                        "path": str(e.exe_path),
                        "dir": str(e.dir),
                        "size_bytes": r.size_bytes,
                        "installed_at": r.installed_at.isoformat(),
                        "sha256": primary.sha256 if primary else None,
                        "verified_by": primary.verified_by if primary else None,
                        "pinned_by": sorted(
                            m for m, ov in settings.models.items() if ov.backend == e.id
                        ),
                        "capabilities": r.capabilities,
                    }
                )
            )
        return out

    async def backends_info(self) -> list[BackendRowInfo]:
        """The registry in order as ``backends --json`` and the HTTP API show it: each row
        with its classes and capabilities (a manual llama row is probed on first use)."""
        from ._registry import row_json

        rows = [row_json(r) for r in await self.backends()]
        caps = await self.backend_capabilities()
        return [
            BackendRowInfo.model_validate({**r, "capabilities": caps.get(r["id"])}) for r in rows
        ]

    async def backend_capabilities(self) -> dict[str, Capabilities | None]:
        """Per registry row: its build's receipt capabilities, or a manual llama row's probe
        (run on first use, then cached by path, size and mtime)."""
        from ._capabilities import capability_index

        settings = await self.settings()
        index = await anyio.to_thread.run_sync(
            capability_index, settings, self.builds, self.paths.cache
        )
        return {row.id: index.of(row.path) for row in settings.backends}

    async def doctor(self, *, fix: bool = False) -> DoctorReport:
        """Registry against disk, stale pins, missing executables, leftover folders."""
        import shutil as _shutil

        restored: list[Path] = []
        removed: list[Path] = []
        if fix:
            # Finish interrupted swaps first, so that adoption registers the recovered builds.
            restored, removed = await anyio.to_thread.run_sync(self.builds.tidy)
            removed += await anyio.to_thread.run_sync(self.builds.remove_part_files)
            await self.sync_registry()
        settings = await self.settings()
        problems: list[str] = []
        installed = {e.id: e for e in self.builds.installed()}
        row_ids = {r.id for r in settings.backends}
        for row in settings.backends:
            exists = Path(row.path).exists() or (
                not row.managed and os.sep not in row.path and _shutil.which(row.path)
            )
            if row.build and row.id not in installed:
                problems.append(f'build row "{row.id}" has no installed build')
            elif not exists:
                problems.append(f'row "{row.id}": executable {row.path} is missing')
        for build_id in installed:
            if build_id not in row_ids:
                problems.append(f"{build_id} is installed but has no registry row")
        # A stale pin is allowed (resolution falls back with a note), so it does not fail.
        notes = [
            f'model "{model}" is pinned to missing row "{ov.backend}"; it falls back'
            for model, ov in sorted(settings.models.items())
            if ov.backend and ov.backend not in row_ids
        ]
        for folder in self.builds.leftovers():
            if ".swap-" in folder.name:
                problems.append(f"interrupted reinstall {folder} (doctor --fix finishes it)")
            else:
                problems.append(f"leftover folder {folder} (doctor --fix removes it)")
        notes += [f"finished an interrupted install: {path} is complete" for path in restored]
        notes += [
            w
            for e in installed.values()
            if (w := missing_gpu(e.id, e.receipt.variant, e.receipt.capabilities))
        ]
        notes += _part_notes(self.builds.part_files())
        output_problem, output_note = await anyio.to_thread.run_sync(self._check_output, settings)
        problems += output_problem
        notes += output_note
        from ..emit.devices import pin_notes  # issue 24: the GPUs, and pins to missing ones

        notes += pin_notes(settings, self.host.adapters)
        return DoctorReport(
            ok=not problems,
            problems=problems,
            notes=notes,
            fixed=[str(p) for p in removed],
            gpus=self.host.gpu_lines(),
        )


def _dry_run_head(build_id: str, target: Path, installed: bool) -> str:
    """The first line of a dry run: what would happen, or that nothing would."""
    if installed:
        return f"{build_id} is already installed in {target}; nothing to do (--reinstall redoes it)"
    return f"would install {build_id} into {target}"


def _shown_size(size: int | None) -> str:
    return "size unknown" if size is None else format_size(size)


def _part_notes(parts: list[Path]) -> list[str]:
    """Partial downloads are kept to resume, so they are notes, not problems."""
    notes = []
    for part in parts:
        with contextlib.suppress(OSError):
            size = part.stat().st_size
            notes.append(
                f"partial download {part} ({format_size(size)}) is kept to resume the "
                "next install of that build; doctor --fix removes it"
            )
    return notes
