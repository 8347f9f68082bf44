"""``uninstall`` of one or more builds: every one is checked first, so none or all go (§9)."""

from __future__ import annotations

import contextlib
from dataclasses import replace
from typing import Any

import anyio

from ..api_models import UninstallResult
from ..config.models import Settings
from ..errors import Refused
from ..install.store import InstalledEntry
from ..registry import rows as registry
from ..requests import UninstallRequest
from .context import Context
from .facts import activated_id, find_build, pinned_by
from .generate import Generator
from .models import Models

__all__ = ["Uninstaller"]


class Uninstaller:
    def __init__(self, ctx: Context, models: Models, generator: Generator) -> None:
        self.ctx = ctx
        self.models = models
        self.generator = generator

    def _refusal(
        self, entry: InstalledEntry, settings: Settings, leaving: set[str], force: bool
    ) -> tuple[str | None, list[str]]:
        """Why removing ``entry`` (with the builds in ``leaving``) is refused, and its pins."""
        r = entry.receipt
        remaining = [e for e in self.ctx.builds.installed(r.component) if e.id not in leaving]
        pinned = pinned_by(settings, entry.id)
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

    async def uninstall(self, req: UninstallRequest) -> UninstallResult:
        ctx = self.ctx
        entries: dict[str, InstalledEntry] = {}
        for one in req.builds:
            entry = find_build(ctx.builds, one)
            entries[entry.id] = entry
        leaving = set(entries)
        async with contextlib.AsyncExitStack() as stack:
            for entry in sorted(entries.values(), key=lambda e: e.id):  # one order: no deadlock
                r = entry.receipt
                await stack.enter_async_context(ctx.build_lock(r.component, r.version, r.variant))
            settings = await ctx.settings()
            refusals, pins = [], []
            for entry in entries.values():
                why, pinned = self._refusal(entry, settings, leaving, req.force)
                if why:
                    refusals.append(why)
                pins += pinned
            if refusals:
                more = f" (and {len(refusals) - 1} more refusal(s); nothing was removed)"
                raise Refused(refusals[0] + (more if len(refusals) > 1 else ""))
            gone = sorted(
                {e.receipt.component for e in entries.values()}
                - {e.receipt.component for e in ctx.builds.installed() if e.id not in leaving}
            )
            losing = await self.models.losing(set(gone) | leaving) if gone else []

            def change(s: Settings) -> tuple[Settings, None]:
                rows = list(s.backends)
                for component in {e.receipt.component for e in entries.values()}:
                    builds = [
                        e.as_build() for e in ctx.builds.installed(component) if e.id not in leaving
                    ]
                    rows = registry.sync_build_rows(rows, component, builds)
                rows = [x for x in rows if not (x.managed and x.id in gone)]
                return replace(s, backends=rows), None

            dry: dict[str, Any] = {}
            if req.dry_run:  # every check above, then the config's diff; nothing removed
                dry = {"dry_run": True, "diff": (await ctx.preview(change))[1]}
            else:
                # The config first, then the folders: killed between the two, the builds are
                # still there and their rows come back with them (adoption), as if nothing had
                # happened; the other way round left rows no command but doctor --fix removes.
                await ctx.update(change)
                for entry in entries.values():
                    await anyio.to_thread.run_sync(ctx.builds.remove, entry)
        warnings = [] if dry else await self.generator.after(req.generate)
        if pins:
            warnings.append(f"stale pins now fall back: {', '.join(sorted(set(pins)))}")
        if gone:
            rows = ", ".join(f'"{c}"' for c in gone)
            verb = "would remove" if dry else "removed"
            warnings.append(f"{verb} the {rows} row{'s' if len(gone) > 1 else ''}")
        if losing:
            warnings.append(
                f"these models lose their backend and fall back (SPEC §4): {', '.join(losing)}"
            )
        ids = sorted(entries)
        return UninstallResult(
            message=f"{'would uninstall' if dry else 'uninstalled'} {', '.join(ids)}",
            warnings=warnings,
            id=ids[0] if len(ids) == 1 else None,
            ids=ids,
            removed=not dry,
            rows_removed=gone,
            models_fall_back=losing,
            **dry,
        )
