"""Questions about this machine: ``which`` (the executable that would run, and why),
``config path|show``, and the local names shell completion offers."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from .. import api_models as am  # ConfigInfo made by ``config`` only (a lazy package)
from ..api_models import WhichResult
from ..config.models import ModelOverride, Settings
from ..errors import NotFound, Refused, Unknown
from ..registry.kinds import classes_of
from ..registry.resolve import resolve
from .context import Context
from .facts import activated_id, executable_exists, find_build, pinned_by

if TYPE_CHECKING:
    from .models import Models

__all__ = ["Which"]


class Which:
    """``which``, ``config path|show``: answers from the settings, builds and planner."""

    def __init__(self, ctx: Context, models: Callable[[], Models]) -> None:
        self.ctx = ctx
        # made on first use: only ``which MODEL`` plans; the other answers (a row, the local
        # names <TAB> offers, ``config``) load no planner, nor the stores it reads
        self.models = models

    def which(self, target: str) -> WhichResult:
        """The executable that would run for a model, component, build or row, and why."""
        settings = self.ctx.store.read()
        row = settings.row(target)
        if row is None and "@" in target:
            row = settings.row(find_build(self.ctx.builds, target).id)
        if row is not None:
            return _which_row(settings, target, row.id)
        if target in self.ctx.component_ids():
            raise NotFound(f'{target} is not installed; run "backendmgr install {target}"')
        from ..emit.plan import Skip

        # this model planned alone, on the settings read above (the config is read once)
        plan = self.models().pipeline(settings, only=target)
        planned = plan.planned(target)
        skip = next((s for s in plan.found.skipped if s.id == target), None)
        if planned is not None or skip is not None:
            # as ``models`` shows it: a skip's reason, else the row that serves it
            reason = skip.reason if skip else planned.reason if isinstance(planned, Skip) else None
            res = planned.resolution if planned is not None else None
            if reason or res is None or planned is None:
                raise Refused(f"{target} is skipped: {reason or 'no backend'}")
            return WhichResult(
                target=target,
                type="model",
                row=res.row.id if res.row else None,
                path=res.exe,
                exists=executable_exists(res.exe),
                reason=res.reason,
                notes=list(planned.notes),
            )
        raise Unknown(
            f'no model, component, build or row "{target}"; see "backendmgr models", '
            '"backendmgr list" and "backendmgr backends"'
        )

    def config_info(self) -> am.ConfigInfo:
        """Where every file lives, and the settings with their defaults filled in."""
        settings = self.ctx.store.read()
        p = self.ctx.paths
        return am.ConfigInfo(
            config=str(p.config_file),
            config_exists=p.config_file.is_file(),
            output=str(self.ctx.output_path(settings)),
            home=str(p.home),
            builds=str(p.builds),
            downloads=str(p.downloads),
            cache=str(p.cache),
            manifests=str(p.user_manifests),
            settings=settings,
        )


def _which_row(settings: Settings, target: str, row_id: str) -> WhichResult:
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
    pinned = pinned_by(settings, row.id)
    if pinned:
        why.append(f"pinned by {', '.join(pinned)}")
    return WhichResult(
        target=target,
        type=kind,
        row=row.id,
        path=row.path,
        exists=executable_exists(row.path),
        reason="; ".join(why),
        notes=[],
    )
