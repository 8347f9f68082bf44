"""A switch never breaks a model's flags (issue 32): before ``activate``, ``pin`` or a canary's
promotion changes the build a model runs, each flag of the model's ``extra_args`` is checked
against the new build's capability probe (its receipt). A flag the build does not list refuses
the switch (exit 1: the build refuses it), one line per model and flag; ``--force`` switches
anyway and says which flags were kept. ``set extra_args=…`` warns the same way at once."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from ..catalog.capabilities import unlisted_flags
from ..errors import Refused, did_you_mean

if TYPE_CHECKING:
    from collections.abc import Callable

    from ..config.models import Settings
    from ..install.builds import BuildStore
    from ..install.store import InstalledEntry
    from .models import Plan

__all__ = ["check_switch", "flag_lines", "followers", "pin_target", "unpin_lines"]


def flag_lines(settings: Settings, models: list[str], entry: InstalledEntry) -> list[str]:
    """``chat: --foo is not an option of llama-server@b2-cpu (its extra_args); did you mean
    --foo-bar?`` for each model and flag, with the build's nearest options."""
    caps = entry.receipt.capabilities
    known = (caps.options or []) if caps is not None else []
    out = []
    for model in models:
        for flag in unlisted_flags(settings.override(model).extra_args, caps):
            near = did_you_mean(flag, known)
            out.append(f"{model}: {flag} is not an option of {entry.id} (its extra_args){near}")
    return out


def followers(plan: Plan, component: str) -> list[str]:
    """The models that run on ``component``'s activated build (not pinned to another)."""
    out = []
    for entry in plan.entries():
        row = entry.resolution.row
        if row is not None and row.managed and not row.build and row.component == component:
            out.append(entry.model.id)
    return out


FORCE = "--force switches anyway"


def check_switch(
    settings: Settings,
    models: list[str],
    entry: InstalledEntry,
    *,
    force: bool,
    way_out: str = FORCE,
) -> list[str]:
    """Refuse the switch of ``models`` to ``entry`` when it would drop a flag they use; with
    ``force``, the lines to show as warnings instead. ``way_out`` is what the refusal offers
    (a canary has no ``--force``: it names what does switch)."""
    lines = flag_lines(settings, models, entry)
    if lines and not force:
        raise Refused("; ".join(lines) + f"; nothing was switched ({way_out})")
    return [f"kept with --force: {line}" for line in lines]


def pin_target(settings: Settings, builds: BuildStore, row_id: str) -> InstalledEntry | None:
    """The installed build a pin to ``row_id`` makes a model run: a build row's own, or a
    component row's activated build (``pin chat llama-server`` switches builds too); None
    for a manual row."""
    from ..registry.rows import build_id_of

    build = build_id_of(settings.row(row_id))
    return next((e for e in builds.installed() if e.id == build), None) if build else None


def unpin_lines(
    settings: Settings,
    pipeline: Callable[[Settings, str], Plan],
    builds: BuildStore,
    model: str,
) -> list[str]:
    """What unpinning ``model`` would break, as warnings (``unpin`` has no ``--force`` to
    ask for): each flag of its ``extra_args`` the build it then runs does not list."""
    ov = settings.override(model)
    if ov.backend is None:
        return []
    unpinned = replace(ov, backend=None)
    trial = replace(settings, models={**settings.models, model: unpinned})
    plan = pipeline(trial, model)  # that model alone: the plan the whole run gives it
    planned = next(
        (p for m, p in zip(plan.found.models, plan.plans, strict=True) if m.id == model), None
    )  # None: unpin takes a model discovery does not know (yet)
    res = getattr(planned, "resolution", None)
    entry = pin_target(trial, builds, res.row.id) if res and res.row else None
    lines = flag_lines(trial, [model], entry) if entry else []
    return [f"unpinned anyway: {line}" for line in lines]
