"""``doctor``: the registry against the disk, stale pins, missing executables, leftover
folders and the written llama-swap config; with ``fix``, repair what can be repaired."""

from __future__ import annotations

import contextlib
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from ..api_models import DoctorReport
from ..catalog.capabilities import missing_gpu
from ..config.models import BackendRow, Settings
from ..errors import BackendmgrError, did_you_mean
from ..requests import DoctorRequest, GenerateRequest
from ..units import format_size
from .context import Context
from .facts import executable_exists
from .generate import Generator
from .probe import GpuProbe

if TYPE_CHECKING:
    from ..discovery.models import Discovery

__all__ = ["Doctor"]


class Doctor:
    def __init__(self, ctx: Context, probe: GpuProbe, generator: Generator) -> None:
        self.ctx = ctx
        self.probe = probe
        self.generator = generator

    async def check(self, req: DoctorRequest) -> DoctorReport:
        builds = self.ctx.builds
        fixed: list[str] = []
        problems: list[str] = []
        if req.fix:
            fixed, problems = await self._fix()
        settings = await self.ctx.settings()
        installed = {e.id: e for e in builds.installed()}
        row_ids = {r.id for r in settings.backends}
        for row in settings.backends:
            if row.build and row.id not in installed:
                problems.append(f'build row "{row.id}" has no installed build')
            elif not executable_exists(row.path, on_path=not row.managed):
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
        from ..install.venv_job import KEPT_MARK

        for folder in builds.leftovers():
            if builds.busy(folder):  # a running install's (or removal's) own folder
                notes.append(f"{folder} belongs to an install or removal that is running")
            elif ".swap-" in folder.name:
                problems.append(f"interrupted reinstall {folder} (doctor --fix finishes it)")
            elif (folder / KEPT_MARK).is_file():  # kept on purpose: not a problem
                notes.append(
                    f"{folder} is a venv kept after its --version check timed out; the next "
                    "install of that build reuses it (doctor --fix removes it)"
                )
            else:
                problems.append(f"leftover folder {folder} (doctor --fix removes it)")
        notes += [
            w
            for e in installed.values()
            if (w := missing_gpu(e.id, e.receipt.variant, e.receipt.capabilities))
        ]
        idle = []
        for part in builds.part_files():
            if builds.busy(part):
                notes.append(f"{part} belongs to a download that is running")
            else:
                idle.append(part)
        notes += _part_notes(idle)
        # exactly what ``generate --check`` refuses: a problem, or a note for a stale file
        plan = await anyio.to_thread.run_sync(self.generator.models.pipeline, settings)
        # issue 33: a pin or setting saved for a model id that no models folder has
        problems += [
            f'settings for "{model}" ({_named(settings, model)}) match no model in models_dirs '
            f"(doctor --fix removes them){close}"
            for model, close in _orphans(settings, plan.found)
        ]
        target = self.ctx.output_path(settings)
        problems += [
            f"{tmp} is left by a write that was interrupted (doctor --fix removes it)"
            for tmp in await anyio.to_thread.run_sync(self._temps, target)
        ]
        found = await anyio.to_thread.run_sync(self.generator.inspect, plan, target)
        problems += [f.text for f in found if f.problem]
        output_notes = [f.text for f in found if not f.problem]
        refused, loaded = await _llama_swap_loads(settings, target)
        problems += refused
        output_notes += loaded
        from ..emit.devices import pin_notes

        host = self.probe.host
        return DoctorReport(
            ok=not problems,
            problems=problems,
            # issue 24: pins to GPUs this host lacks
            notes=notes + output_notes + pin_notes(settings, host.adapters),
            fixed=fixed,
            gpus=host.gpu_lines(),
        )

    def _temps(self, target: Path) -> list[Path]:
        """What killed writes of the config, its snapshot, the output and its record left."""
        from .._fs import leftover_temps
        from ..config.snapshot import snapshot_path
        from ..emit.regen import written_record

        config = self.ctx.store.path
        record = written_record(self.ctx.paths.home, target)
        return leftover_temps(config, snapshot_path(config), target, record)

    async def _fix(self) -> tuple[list[str], list[str]]:
        """``doctor --fix``: each repair as a line, and what stopped one (a problem)."""
        builds = self.ctx.builds
        # Finish interrupted swaps first, so that adoption registers the recovered builds.
        restored, removed = await anyio.to_thread.run_sync(builds.tidy)
        fixed = [f"finished an interrupted reinstall: {path} is complete" for path in restored]
        fixed += [f"removed leftover folder {path}" for path in removed]
        parts = await anyio.to_thread.run_sync(builds.remove_part_files)
        fixed += [f"removed partial download {path}" for path in parts]
        before = (await self.ctx.settings()).backends
        await self.generator.sync_registry()
        fixed += _row_repairs(before, (await self.ctx.settings()).backends)
        removed_models, kept_why = await self._remove_orphans()
        fixed += removed_models
        temps = self._temps(self.ctx.output_path(await self.ctx.settings()))
        await self.ctx.update(lambda s: (s, None))  # the config's lock: its writes' leftovers
        try:  # like every other change: the llama-swap config follows (the output's leftovers)
            written = await self.generator.generate(GenerateRequest())
        except BackendmgrError as exc:
            problem = f"the llama-swap config could not be rewritten: {exc}"
            return fixed + _removed(temps), [*kept_why, problem]
        if written.written:
            kept = f"; kept the edited copy as {written.backup}" if written.backup else ""
            fixed.append(f"rewrote {written.output}{kept}")
        return fixed + _removed(temps), kept_why

    async def _remove_orphans(self) -> tuple[list[str], list[str]]:
        """Remove the settings of model ids no models folder has, a line per model; none
        while a models folder cannot be scanned (an unmounted disk is not a deleted model)."""
        from .facts import discover
        from .models import _folder_problems

        settings = await self.ctx.settings()
        config, cache = self.ctx.store.path, self.ctx.paths.cache
        _, found = await anyio.to_thread.run_sync(discover, settings, config, cache)
        gone = {model for model, _ in _orphans(settings, found)}
        if not gone:
            return [], []
        unreadable = await anyio.to_thread.run_sync(
            _folder_problems, settings.models_dirs, self.ctx.store.path
        )
        if unreadable:
            return [], [f"kept the settings of undiscovered models: {unreadable[0]}"]

        def change(s: Settings) -> tuple[Settings, list[str]]:
            removed = sorted(m for m in s.models if m in gone)
            lines = [
                f'removed the settings of "{m}" ({_named(s, m)}): no models folder has it'
                for m in removed
            ]
            kept = {m: ov for m, ov in s.models.items() if m not in gone}
            return replace(s, models=kept), lines

        return await self.ctx.update(change), []


def _removed(temps: list[Path]) -> list[str]:
    """A line for each leftover temporary file that is gone now."""
    return [f"removed {tmp}, left by an interrupted write" for tmp in temps if not tmp.exists()]


def _orphans(settings: Settings, found: Discovery) -> list[tuple[str, str]]:
    """Model ids with settings that discovery does not know, each with its did-you-mean."""
    ids = [m.id for m in found.models] + [s.id for s in found.skipped]
    known = set(ids)
    return [
        (model, did_you_mean(model, ids)) for model in sorted(settings.models) if model not in known
    ]


def _named(settings: Settings, model: str) -> str:
    """What is set for ``model``: ``pin to "row", ctx``."""
    override = settings.models[model]
    keys = override.to_yaml()
    parts = [f'pin to "{keys.pop("backend")}"'] if "backend" in keys else []
    return ", ".join([*parts, *keys])


def _swap_exe(settings: Settings) -> Path | None:
    """The llama-swap that would load the file: the activated build, else one on PATH."""
    import shutil

    from .facts import activated_id, executable_exists
    from .swap import COMPONENT

    row, build = settings.row(COMPONENT), activated_id(settings, COMPONENT)
    if row is not None and build is not None and executable_exists(row.path, on_path=False):
        return Path(row.path)
    found = shutil.which(COMPONENT)
    return Path(found) if found else None


async def _llama_swap_loads(settings: Settings, target: Path) -> tuple[list[str], list[str]]:
    """Issue 28: where the real llama-swap is installed, it loads the written file (a short
    trial, killed by pid): its refusal is a problem, its success a note."""
    from ..swap.trial import trial_load

    exe = _swap_exe(settings)
    if exe is None or not target.is_file():
        return [], []
    verdict = await trial_load(exe, target)
    if verdict.loaded:
        return [], [f"llama-swap {exe} loads {target} ({verdict.detail})"]
    return [f"llama-swap {exe} refuses {target}: {verdict.detail}"], []


def _row_repairs(before: list[BackendRow], after: list[BackendRow]) -> list[str]:
    """What adoption changed in the registry, a line per row."""
    old = {r.id: r for r in before}
    new = {r.id: r for r in after}
    lines = [
        f'removed build row "{r.id}": its build folder is gone'
        if r.build
        else f'removed row "{r.id}": its build is gone'
        for r in before
        if r.id not in new
    ]
    for r in after:
        was = old.get(r.id)
        if was is None:
            lines.append(f'added row "{r.id}" for the installed build at {r.path}')
        elif was.path != r.path:
            lines.append(f'repointed row "{r.id}" to {r.path}: {was.path} is gone')
    return lines


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
