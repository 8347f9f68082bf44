"""``activate``, and the registration every install ends with: which build a component's
managed row runs, the build rows beside it, and who holds the default (★)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..config.models import ModelOverride, Settings
from ..immutable import frozen
from ..registry import rows as registry
from ..registry.installed import newest_first
from ..registry.kinds import classes_of
from ..registry.resolve import resolve
from ..versioning import version_key
from .facts import activated_id, executable_exists, find_build

if TYPE_CHECKING:  # made for every switch (pin's too): what only activate uses loads there
    from ..api_models import ActivateResult
    from ..install.store import InstalledEntry
    from ..requests import ActivateRequest
    from .context import Context
    from .generate import Generator

__all__ = ["Activation", "Registered"]


@frozen(repr=True, eq=True)
class Registered:
    activated: bool
    star: bool  # its component's row has the ★
    other_star: str | None  # the row that has it otherwise
    was_active: bool  # it was the activated build already
    newer: str | None = None  # a newer build of its variant, installed meanwhile, runs instead


@frozen(repr=True)
class Activation:
    ctx: Context
    generator: Generator

    async def register(
        self, entry: InstalledEntry, *, activate: bool, auto: bool = True, first: bool = False
    ) -> Registered:
        """Record the build's rows. ``activate`` activates it. Otherwise (``auto``), when its
        component has no working activated build, or had none when this install started
        (``first``), the newest installed build of its variant is activated: decided here,
        under the config lock, so that concurrent installs into an empty home end on the
        newest whichever registers last. ``first`` never switches the variant someone
        activated meanwhile."""
        return await self.ctx.update(
            self._registration(entry, activate=activate, auto=auto, first=first)
        )

    def _registration(
        self, entry: InstalledEntry, *, activate: bool, auto: bool = True, first: bool = False
    ) -> Callable[[Settings], tuple[Settings, Registered]]:
        build = entry.as_build()
        builds = self.ctx.builds

        def change(s: Settings) -> tuple[Settings, Registered]:
            installed = builds.installed_builds().get(build.component, [])
            managed = s.row(build.component)
            has_active = (
                managed is not None
                and managed.managed
                and executable_exists(managed.path, on_path=False)
            )
            is_active = (
                managed is not None
                and managed.version == build.version
                and managed.variant == build.variant
            )
            rows = list(s.backends)
            star = bool(managed and managed.default)
            target = build if activate or is_active else None
            if target is None and auto and (first or not has_active):
                kin = newest_first(b for b in installed if b.variant == build.variant)
                newest = kin[0] if kin else build
                older = (
                    managed is not None
                    and managed.variant == build.variant
                    and version_key(managed.version or "") < version_key(newest.version)
                )
                if not has_active or older:
                    target = newest
            if target is not None:
                rows, star = registry.upsert_managed(rows, target)
            rows = registry.sync_build_rows(rows, build.component, installed)
            updated = replace(s, backends=rows)
            other = None
            for cls in sorted(classes_of(build.kind)):
                winner = resolve(updated, ModelOverride(), cls).row
                if winner is not None and winner.id != build.component:
                    other = winner.id
            row = updated.row(build.component)
            now = activated_id(updated, build.component)
            this = now == build.build_id
            same_variant = row is not None and row.variant == build.variant
            newer = now if first and same_variant and not this else None
            return updated, Registered(this, star, other, is_active and has_active, newer)

        return change

    async def activate(self, req: ActivateRequest) -> ActivateResult:
        from ..api_models.builds import ActivateResult

        entry = find_build(self.ctx.builds, req.build)
        build = entry.as_build()
        dry: dict[str, Any] = {}
        if req.dry_run:  # the same change, stopped before the write (issue 29)
            registered, diff = await self.ctx.preview(self._registration(entry, activate=True))
            regen: list[str] = []
            dry = {"dry_run": True, "diff": diff}
        else:  # the rewrite checked before the config is written (Generator.change)
            change = self._registration(entry, activate=True)
            registered, regen, _ = await self.generator.change(change, generate=req.generate)
        was_active = registered.was_active
        done, runs = ("would activate", "would run") if dry else ("activated", "now runs")
        return ActivateResult(
            message=f"{entry.id} is already the activated build"
            if was_active
            else f"{done} {entry.id}; every model not pinned to a build {runs} it",
            changed=not was_active,
            warnings=regen,
            **dry,
            id=entry.id,
            component=build.component,
            version=build.version,
            variant=build.variant,
            path=build.exe,
            activated=True,
        )
