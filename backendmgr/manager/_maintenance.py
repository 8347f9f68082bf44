"""Upkeep, the way rustup and uv do it: ``update``, ``prune``, ``cache clean``, ``which``,
``config``, and ``uninstall`` of several builds at once (all checked before any is removed)."""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Sequence
from pathlib import Path

import anyio
from filelock import FileLock, Timeout

from ..api_models import (
    CacheCleanResult,
    ConfigInfo,
    PruneResult,
    UninstallResult,
    UpdateEntry,
    UpdateResult,
    WhichResult,
)
from ..config.models import ModelOverride, Settings
from ..errors import InvalidInput, NotFound, Refused
from ..install.events import EventSink
from ..install.store import InstalledEntry, folder_size
from ..registry import rows as registry
from ..registry.kinds import classes_of
from ..registry.resolve import resolve
from ..units import format_size
from ._builds import BuildsMixin
from ._models import ModelsMixin

__all__ = ["MaintenanceMixin", "activated_id"]


def activated_id(settings: Settings, component: str) -> str | None:
    """The build id the component's managed row points at, if it has one."""
    row = settings.row(component)
    if row is None or not row.managed or not row.version:
        return None
    return registry.build_row_id(component, row.version, row.variant)


def _pinned_to(settings: Settings, row_id: str) -> list[str]:
    return sorted(m for m, ov in settings.models.items() if ov.backend == row_id)


def _size_of(path: Path) -> int:
    if path.is_dir() and not path.is_symlink():
        return folder_size(path)
    with contextlib.suppress(OSError):
        return path.lstat().st_size
    return 0


class MaintenanceMixin(ModelsMixin, BuildsMixin):
    # --- uninstall ------------------------------------------------------------------------

    def _refusal(
        self, entry: InstalledEntry, settings: Settings, leaving: set[str], force: bool
    ) -> tuple[str | None, list[str]]:
        """Why removing ``entry`` (with the builds in ``leaving``) is refused, and its pins."""
        r = entry.receipt
        remaining = [e for e in self.builds.installed(r.component) if e.id not in leaving]
        pinned = _pinned_to(settings, entry.id)
        if activated_id(settings, r.component) == entry.id and remaining:
            return (
                f"{entry.id} is the activated build of {r.component}; activate another build "
                f'first (e.g. "backendmgr activate {remaining[0].id}")'
            ), pinned
        if not remaining and not force:
            return (
                f"{entry.id} is the only build of {r.component}; use --force to remove it and "
                f'its "{r.component}" row (models that use it fall back)'
            ), pinned
        if pinned and not force:
            return (
                f"{entry.id} is pinned by {', '.join(pinned)}; unpin them or use --force "
                "(their pins then fall back with a note)"
            ), pinned
        return None, pinned

    async def uninstall(
        self, ref: str | Sequence[str], *, force: bool = False, generate: bool = True
    ) -> UninstallResult:
        """Remove one or more builds; every one is checked first, so none or all go (§9)."""
        refs = [ref] if isinstance(ref, str) else list(ref)
        if not refs:
            raise InvalidInput("name at least one build to uninstall")
        entries: dict[str, InstalledEntry] = {}
        for one in refs:
            entry = self._find_build(one)
            entries[entry.id] = entry
        leaving = set(entries)
        async with contextlib.AsyncExitStack() as stack:
            for entry in sorted(entries.values(), key=lambda e: e.id):  # one order: no deadlock
                r = entry.receipt
                await stack.enter_async_context(self._build_lock(r.component, r.version, r.variant))
            settings = await self.settings()
            refusals, pins = [], []
            for entry in entries.values():
                why, pinned = self._refusal(entry, settings, leaving, force)
                if why:
                    refusals.append(why)
                pins += pinned
            if refusals:
                more = f" (and {len(refusals) - 1} more refusal(s); nothing was removed)"
                raise Refused(refusals[0] + (more if len(refusals) > 1 else ""))
            gone = sorted(
                {e.receipt.component for e in entries.values()}
                - {e.receipt.component for e in self.builds.installed() if e.id not in leaving}
            )
            losing = await self._models_losing(set(gone) | leaving) if gone else []
            for entry in entries.values():
                await anyio.to_thread.run_sync(self.builds.remove, entry)

            def change(s: Settings) -> tuple[Settings, None]:
                rows = list(s.backends)
                for component in {e.receipt.component for e in entries.values()}:
                    builds = [e.as_build() for e in self.builds.installed(component)]
                    rows = registry.sync_build_rows(rows, component, builds)
                rows = [x for x in rows if not (x.managed and x.id in gone)]
                return s.model_copy(update={"backends": rows}), None

            await anyio.to_thread.run_sync(self.store.update, change)
        warnings: list[str] = await self.regenerate() if generate else []
        if pins:
            warnings.append(f"stale pins now fall back: {', '.join(sorted(set(pins)))}")
        if gone:
            rows = ", ".join(f'"{c}"' for c in gone)
            warnings.append(f"removed the {rows} row{'s' if len(gone) > 1 else ''}")
        if losing:
            warnings.append(
                f"these models lose their backend and fall back (SPEC §4): {', '.join(losing)}"
            )
        ids = sorted(entries)
        return UninstallResult(
            message=f"uninstalled {', '.join(ids)}",
            warnings=warnings,
            id=ids[0] if len(ids) == 1 else None,
            ids=ids,
            removed=True,
            rows_removed=gone,
            models_fall_back=losing,
        )

    async def _models_losing(self, row_ids: set[str]) -> list[str]:
        """Discovered models whose backend is one of ``row_ids`` (managed or build rows)."""
        return sorted(
            m.id
            for m in await self.models_info()
            if m.backend is not None and m.backend.id in row_ids
        )

    # --- update ---------------------------------------------------------------------------

    async def update(
        self,
        components: Sequence[str] = (),
        *,
        dry_run: bool = False,
        on_event: EventSink | None = None,
        generate: bool = True,
    ) -> UpdateResult:
        """Newest release of each installed component, in its activated build's variant.

        The release listing is always revalidated (an ETag request), as ``rustup update`` does.
        """
        settings = await self.settings()
        installed = self.builds.installed()
        wanted = list(dict.fromkeys(components)) or sorted({e.receipt.component for e in installed})
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
        for component, variant, current in plan:
            probe = await self.install(component, variant=variant, dry_run=True, refresh=True)
            newest = probe.id
            if newest == current:
                action = "up-to-date"
                lines.append(f"{component}: {newest} is the newest {variant} build")
            elif dry_run:
                action = "activate" if probe.already_installed else "install"
                verb = "activate" if action == "activate" else "install and activate"
                lines.append(f"{component}: would {verb} {newest} (now {current or 'none'})")
            else:
                done = await self.install(
                    component,
                    probe.version,
                    variant=variant,
                    activate=True,
                    on_event=on_event,
                    generate=False,
                )
                action = "activated" if done.already_installed else "installed"
                lines.append(f"{component}: {current or 'none'} -> {newest}")
            updates.append(
                UpdateEntry(
                    component=component, variant=variant, from_=current, to=newest, action=action
                )
            )
        changed = not dry_run and any(u.action != "up-to-date" for u in updates)
        regen = await self.regenerate() if generate and changed else []
        if not updates:
            lines.append('nothing is installed; try "backendmgr install llama-server"')
        return UpdateResult(
            message="\n".join(lines),
            changed=changed,
            warnings=regen,
            updates=updates,
            dry_run=dry_run,
        )

    # --- prune and cache clean ------------------------------------------------------------

    async def prune(
        self,
        component: str | None = None,
        *,
        keep: int = 1,
        dry_run: bool = False,
        generate: bool = True,
    ) -> PruneResult:
        """Remove builds that are neither activated nor pinned, beyond the ``keep`` newest."""
        if keep < 0:
            raise InvalidInput(f"--keep must be 0 or more, not {keep}")
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
            await self.uninstall(ids, generate=generate)
        return result

    def _hold_build_locks(self, stack: contextlib.ExitStack) -> bool:
        """Take every build lock that exists, for as long as ``stack`` lives; False when one
        is held elsewhere (an install may be writing its ``.part`` file, so keep them all)."""
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

    async def cache_clean(self, *, dry_run: bool = False) -> CacheCleanResult:
        """Release listings, partial downloads and leftover folders; says what it freed."""

        def work() -> CacheCleanResult:
            with contextlib.ExitStack() as stack:  # the build locks, while parts are removed
                listings, parts, busy = self._cache_targets(stack)
                freed = sum(_size_of(p) for p in (*listings, *parts))
                if not dry_run:
                    for path in (*listings, *parts):
                        path.unlink(missing_ok=True)
            # leftovers take their own lock, one at a time (remove_leftovers)
            sizes = {p: _size_of(p) for p in self.builds.leftovers()}
            removed = list(sizes) if dry_run else self.builds.remove_leftovers()
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

    # --- which and config -----------------------------------------------------------------

    async def which(self, target: str) -> WhichResult:
        """The executable that would run for a model, component, build or row, and why."""
        settings = await self.settings()
        row = settings.row(target)
        if row is None and "@" in target:
            row = settings.row(self._find_build(target).id)
        if row is not None:
            return self._which_row(settings, target, row.id)
        if target in self.catalog.ids():
            raise NotFound(f'{target} is not installed; run "backendmgr install {target}"')
        for model in await self.models_info():
            if model.id != target:
                continue
            if model.skipped or model.backend is None:
                raise Refused(f"{target} is skipped: {model.skipped or 'no backend'}")
            backend = model.backend
            return WhichResult(
                target=target,
                type="model",
                row=backend.id,
                path=backend.path,
                exists=_exists(backend.path),
                reason=backend.reason,
                notes=model.notes,
            )
        raise NotFound(
            f'no model, component, build or row "{target}"; see "backendmgr models", '
            '"backendmgr list" and "backendmgr backends"'
        )

    def _which_row(self, settings: Settings, target: str, row_id: str) -> WhichResult:
        row = settings.row(row_id)
        assert row is not None
        if row.build:
            kind = "build"
            why = [f"the installed build {row.id}"]
        elif row.managed:
            kind = "component"
            why = [f"{row.id} runs its activated build {activated_id(settings, row.id)}"]
        else:
            kind = "row"
            why = [f"the manual row {row.id}"]
        for cls in sorted(classes_of(row.kind)):
            res = resolve(settings, ModelOverride(), cls)
            if res.row is not None and res.row.id == row.id:
                why.append(f"{res.reason}: unpinned {cls} models run it")
            else:
                other = res.row.id if res.row else f"legacy {res.exe}"
                why.append(f"{cls} models run it only when pinned to it ({other} serves the rest)")
        pinned = _pinned_to(settings, row.id)
        if pinned:
            why.append(f"pinned by {', '.join(pinned)}")
        return WhichResult(
            target=target,
            type=kind,
            row=row.id,
            path=row.path,
            exists=_exists(row.path),
            reason="; ".join(why),
            notes=[],
        )

    def local_names(self, kind: str) -> list[str]:
        """Ids from local state only (no network), for shell completion: ``components``,
        ``builds``, ``rows`` or ``models``."""
        if kind == "components":
            return list(self.catalog.ids())
        if kind == "builds":
            return [e.id for e in self.builds.installed()]
        settings = self.store.read()
        if kind == "rows":
            return [r.id for r in settings.backends]
        if kind == "models":
            from ..discovery.walk import discover, scan_folders

            scan = scan_folders(settings.models_dirs)
            found = discover(scan, self.paths.cache / "gguf-meta.json")
            ids = {m.id for m in found.models} | {s.id for s in found.skipped}
            return sorted(ids | set(settings.models))
        raise InvalidInput(f'unknown kind of name "{kind}"')

    async def config_info(self) -> ConfigInfo:
        """Where every file lives, and the settings with their defaults filled in."""
        settings = await self.settings()
        p = self.paths
        return ConfigInfo(
            config=str(p.config_file),
            config_exists=p.config_file.is_file(),
            output=str(self.output_path(settings)),
            home=str(p.home),
            builds=str(p.builds),
            downloads=str(p.downloads),
            cache=str(p.cache),
            manifests=str(p.user_manifests),
            settings=settings,
        )


def _exists(path: str | None) -> bool:
    if not path:
        return False
    return Path(path).exists() or ("/" not in path and shutil.which(path) is not None)
