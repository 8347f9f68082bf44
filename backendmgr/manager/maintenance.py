"""Upkeep, the way rustup and uv do it: ``update`` (newest release of each installed
component), ``prune`` (builds neither activated nor pinned) and ``cache clean``."""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from ..api_models import CacheCleanResult, PruneResult, UpdateEntry, UpdateResult
from ..errors import NotFound, Refused
from ..events import EventSink
from ..immutable import frozen
from ..install.builds import BuildStore
from ..install.store import InstalledEntry, folder_size
from ..requests import (
    ActivateRequest,
    CacheCleanRequest,
    InstallRequest,
    PruneRequest,
    UninstallRequest,
    UpdateRequest,
)
from ..units import format_size
from .facts import activated_id
from .generate import Generator
from .install import Installer
from .uninstall import Uninstaller

if TYPE_CHECKING:
    from ..catalog.manifest import Manifest
    from ..config.models import Settings
    from ..config.paths import Paths

__all__ = ["Maintenance"]


def _size_of(path: Path) -> int:
    if path.is_dir() and not path.is_symlink():
        return folder_size(path)
    with contextlib.suppress(OSError):
        return path.lstat().st_size
    return 0


@frozen
class Maintenance:
    paths: Paths
    builds: BuildStore
    settings: Callable[[], Awaitable[Settings]]
    manifest: Callable[[str], Manifest]  # a known component's, else the unknown error
    installer: Installer
    uninstaller: Uninstaller
    generator: Generator

    async def update(self, req: UpdateRequest, on_event: EventSink | None = None) -> UpdateResult:
        """Newest release of each installed component, in its activated build's variant.

        The release listing is always revalidated (an ETag request), as ``rustup update`` does.
        """
        settings = await self.settings()
        installed = self.builds.installed()
        wanted = list(dict.fromkeys(req.components)) or sorted(
            {e.receipt.component for e in installed}
        )
        plan: list[tuple[str, str, str | None]] = []
        for component in wanted:
            self.manifest(component)
            own = [e for e in installed if e.receipt.component == component]
            if not own:
                raise NotFound(
                    f'{component} is not installed; run "backendmgr install {component}"'
                )
            current = activated_id(settings, component)
            row = settings.row(component)
            variant = row.variant if current and row else own[0].receipt.variant
            plan.append((component, variant, current))
        updates: list[UpdateEntry] = []
        lines: list[str] = []
        refused: list[str] = []  # a component whose models would lose a flag: not activated
        kept: list[str] = []  # the same with --force: activated, the lines as warnings
        moved: list[str] = []  # what did switch
        for component, variant, current in plan:
            probe = await self.installer.install(
                InstallRequest(component=component, variant=variant, dry_run=True, refresh=True)
            )
            newest = probe.id
            if newest == current:
                action = "up-to-date"
                lines.append(f"{component}: {newest} is the newest {variant} build")
            elif req.dry_run:
                action = "activate" if probe.already_installed else "install"
                # an installed build's options are known: the dry run refuses as the run would
                flags = await self._flags(component, newest) if probe.already_installed else []
                if flags and not req.force:
                    refused.append(self._refusal(flags, newest))
                    continue
                kept += [f"kept with --force: {line}" for line in flags]
                verb = "activate" if action == "activate" else "install and activate"
                lines.append(f"{component}: would {verb} {newest} (now {current or 'none'})")
            else:
                done = await self.installer.install(
                    InstallRequest(
                        component=component,
                        version=probe.version,
                        variant=variant,
                        generate=False,
                    ),
                    on_event,
                )
                flags = await self._flags(component, done.id)
                if flags and not req.force:  # issue 32: the switch would break these models
                    action = "refused"
                    refused.append(self._refusal(flags, newest))
                else:
                    kept += [f"kept with --force: {line}" for line in flags]
                    await self.installer.activation.activate(
                        ActivateRequest(build=done.id, generate=False)
                    )
                    action = "activated" if done.already_installed else "installed"
                    moved.append(f"{component}: {current or 'none'} -> {newest}")
                    lines.append(moved[-1])
            updates.append(
                UpdateEntry(
                    component=component, variant=variant, from_=current, to=newest, action=action
                )
            )
        changed = not req.dry_run and any(
            u.action not in ("up-to-date", "refused") for u in updates
        )
        regen = await self.generator.after(req.generate and changed)
        if refused:  # as activate refuses it (exit 1), after the components that did update
            done_too = f"; updated: {', '.join(moved)}" if moved else ""
            raise Refused("; ".join(refused) + done_too)
        if not updates:
            lines.append('nothing is installed; try "backendmgr install llama-server"')
        return UpdateResult(
            message="\n".join(lines),
            changed=changed,
            warnings=[*kept, *regen],
            updates=updates,
            dry_run=req.dry_run,
        )

    @staticmethod
    def _refusal(flags: list[str], build_id: str) -> str:
        return (
            f"{'; '.join(flags)}; {build_id} is installed, not activated "
            "(update --force activates it anyway)"
        )

    async def _flags(self, component: str, build_id: str) -> list[str]:
        """What activating ``build_id`` would break: one line per model following
        ``component``'s activated build and flag of its ``extra_args`` the build lacks."""
        from .flags import flag_lines, followers

        plan = await self.generator.models.plan()
        entry = next(e for e in self.builds.installed(component) if e.id == build_id)
        return flag_lines(plan.settings, followers(plan, component), entry)

    async def prune(self, req: PruneRequest) -> PruneResult:
        """Remove builds that are neither activated nor pinned, beyond the ``keep`` newest."""
        component, keep, dry_run = req.component, req.keep, req.dry_run
        if component is not None:
            self.manifest(component)
        settings = await self.settings()
        pinned = {ov.backend for ov in settings.models.values() if ov.backend}
        doomed: list[InstalledEntry] = []
        seen: dict[str, int] = {}
        for entry in self.builds.installed(component):  # newest first within a component
            c = entry.receipt.component
            seen[c] = seen.get(c, 0) + 1
            if seen[c] <= keep or entry.id in pinned or activated_id(settings, c) == entry.id:
                continue
            doomed.append(entry)
        ids = [e.id for e in doomed]
        freed = sum(e.receipt.size_bytes or folder_size(e.dir) for e in doomed)
        result = PruneResult(
            message=f"{'would remove' if dry_run else 'removed'} {', '.join(ids)}",
            changed=bool(doomed) and not dry_run,
            removed=ids,
            freed_bytes=freed,
            dry_run=dry_run,
        )
        if not doomed:
            result.message = "nothing to prune"
        elif not dry_run:
            # any number of builds: the request's bound is for what a user names at once
            request = UninstallRequest.unchecked(builds=ids, generate=req.generate)
            await self.uninstaller.uninstall(request)
        return result

    def _hold_build_locks(self, stack: contextlib.ExitStack) -> bool:
        """Take every build lock that exists, for as long as ``stack`` lives; False when one
        is held elsewhere (an install may be writing its ``.part`` file, so keep them all)."""
        from filelock import FileLock, Timeout  # prune's and cache clean's: reads never lock

        locks = self.paths.locks
        if not locks.is_dir():
            return True
        for path in sorted(locks.glob("*.lock")):
            try:
                stack.enter_context(FileLock(path).acquire(timeout=0))
            except Timeout:
                return False
        return True

    def _cache_targets(self, stack: contextlib.ExitStack) -> tuple[list[Path], list[Path], bool]:
        listings = self.paths.cache / "github"
        listing_files = (
            sorted(p for p in listings.rglob("*") if p.is_file()) if listings.is_dir() else []
        )
        free = self._hold_build_locks(stack)
        parts: list[Path] = []
        if free and self.paths.downloads.is_dir():
            parts = sorted(
                p
                for p in self.paths.downloads.iterdir()
                if p.name.endswith((".part", ".part.json"))
            )
        return listing_files, parts, not free

    async def cache_clean(self, req: CacheCleanRequest) -> CacheCleanResult:
        """Release listings, partial downloads and leftover folders; says what it freed."""
        dry_run = req.dry_run
        builds = self.builds

        def work() -> CacheCleanResult:
            with contextlib.ExitStack() as stack:  # the build locks, while parts are removed
                listings, parts, busy = self._cache_targets(stack)
                freed = sum(_size_of(p) for p in (*listings, *parts))
                if not dry_run:
                    for path in (*listings, *parts):
                        path.unlink(missing_ok=True)
            # leftovers take their own lock, one at a time (remove_leftovers)
            sizes = {p: _size_of(p) for p in builds.leftovers()}
            removed = list(sizes) if dry_run else builds.remove_leftovers()
            freed += sum(sizes.get(p, 0) for p in removed)
            shown_parts = [str(p) for p in parts if p.name.endswith(".part")]
            counts = (
                f"{len(listings)} release listing(s), {len(shown_parts)} partial download(s), "
                f"{len(removed)} leftover folder(s)"
            )
            return CacheCleanResult(
                message=f"{'would free' if dry_run else 'freed'} {format_size(freed)}: {counts}",
                changed=not dry_run and freed > 0,
                warnings=["an install is running; its partial downloads were kept"] if busy else [],
                freed_bytes=freed,
                release_listings=[str(p) for p in listings],
                partial_downloads=shown_parts,
                leftovers=[str(p) for p in removed],
                skipped_partial_downloads=busy,
                dry_run=dry_run,
            )

        return await anyio.to_thread.run_sync(work)
