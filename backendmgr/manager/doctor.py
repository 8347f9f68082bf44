"""``doctor``: the registry against the disk, stale pins, missing executables, leftover
folders and the written llama-swap config; with ``fix``, repair what can be repaired."""

from __future__ import annotations

import contextlib
from pathlib import Path

import anyio

from ..api_models import DoctorReport
from ..catalog.capabilities import missing_gpu
from ..requests import DoctorRequest
from ..units import format_size
from .context import Context
from .facts import executable_exists
from .generate import Generator

__all__ = ["Doctor"]


class Doctor:
    def __init__(self, ctx: Context, generator: Generator) -> None:
        self.ctx = ctx
        self.generator = generator

    async def check(self, req: DoctorRequest) -> DoctorReport:
        builds = self.ctx.builds
        restored: list[Path] = []
        removed: list[Path] = []
        if req.fix:
            # Finish interrupted swaps first, so that adoption registers the recovered builds.
            restored, removed = await anyio.to_thread.run_sync(builds.tidy)
            removed += await anyio.to_thread.run_sync(builds.remove_part_files)
            await self.generator.sync_registry()
        settings = await self.ctx.settings()
        problems: list[str] = []
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
        for folder in builds.leftovers():
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
        notes += _part_notes(builds.part_files())
        output_problems, output_notes = await anyio.to_thread.run_sync(
            self.generator.check_output, settings
        )
        problems += output_problems
        from ..emit.devices import pin_notes

        host = self.ctx.host
        return DoctorReport(
            ok=not problems,
            problems=problems,
            # issue 24: pins to GPUs this host lacks
            notes=notes + output_notes + pin_notes(settings, host.adapters),
            fixed=[str(p) for p in removed],
            gpus=host.gpu_lines(),
        )


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
