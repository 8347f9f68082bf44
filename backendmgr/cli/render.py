"""Everything the CLI prints: JSON documents, rich tables, one-line messages and errors."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any, TextIO

__all__ = ["Renderer"]


class Renderer:
    """Turns results into output; the only place that decides between JSON and text."""

    def __init__(
        self,
        *,
        json_mode: bool = False,
        quiet: bool = False,
        stdout: TextIO | None = None,
        stderr: TextIO | None = None,
    ) -> None:
        self.json_mode = json_mode
        self.quiet = quiet
        self.stdout = stdout or sys.stdout
        self.stderr = stderr or sys.stderr

    @property
    def is_terminal(self) -> bool:
        return self.stdout.isatty()

    def console(self) -> Any:
        from rich.console import Console

        width = None if self.is_terminal else 200
        return Console(file=self.stdout, highlight=False, soft_wrap=False, width=width)

    def document(self, data: Any) -> None:
        self.stdout.write(json.dumps(data, indent=2, default=str, ensure_ascii=False) + "\n")

    def info(self, message: str) -> None:
        if not self.quiet and not self.json_mode:
            self.stdout.write(message + "\n")

    def warning(self, message: str) -> None:
        self.stderr.write("warning: " + " ".join(message.split("\n")) + "\n")

    def error(self, message: str) -> None:
        self.stderr.write("error: " + " ".join(message.split("\n")) + "\n")

    def table(self, columns: Sequence[str], rows: Sequence[Sequence[Any]], *, empty: str) -> None:
        if not rows:
            self.info(empty)
            return
        from rich import box
        from rich.table import Table

        table = Table(box=box.SIMPLE_HEAD if self.is_terminal else box.ASCII2)
        for column in columns:
            table.add_column(column, overflow="fold")
        for row in rows:
            table.add_row(*("" if cell is None else str(cell) for cell in row))
        self.console().print(table)


class ProgressView:
    """Draws install events: rich bars on a terminal, one line per phase otherwise."""

    def __init__(self, out: Renderer) -> None:
        self.out = out
        self.live = out.is_terminal and not out.quiet and not out.json_mode
        self._progress: Any = None
        self._tasks: dict[str, Any] = {}
        self._last_phase = ""

    def __enter__(self) -> ProgressView:
        if self.live:
            from rich.progress import (
                BarColumn,
                DownloadColumn,
                Progress,
                TextColumn,
                TransferSpeedColumn,
            )

            self._progress = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                DownloadColumn(),
                TransferSpeedColumn(),
                console=self.out.console(),
                transient=True,
            )
            self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()

    def __call__(self, event: Any) -> None:
        if event.phase in ("failed", "cancelled"):
            return  # the command's own "error:" line says it once
        if event.phase == "downloading" and event.message and not event.asset:
            # installer output (pip / uv): streamed on a terminal, summarised otherwise
            if self._progress is not None:
                self._progress.console.print(
                    f"[dim]  {event.message}[/dim]", markup=True, highlight=False
                )
            elif self._last_phase != "installing" and not self.out.quiet and not self.out.json_mode:
                self._last_phase = "installing"
                self.out.stderr.write("installing\n")
            return
        if self._progress is not None and event.phase == "downloading" and event.asset:
            task = self._tasks.get(event.asset)
            if task is None:
                task = self._progress.add_task(event.asset, total=event.bytes_total)
                self._tasks[event.asset] = task
            self._progress.update(task, completed=event.bytes_done, total=event.bytes_total)
            return
        if event.phase != self._last_phase and not self.live:
            self._last_phase = event.phase
            if not self.out.quiet and not self.out.json_mode:
                detail = f" {event.message or event.asset}".rstrip()
                self.out.stderr.write(f"{event.phase}{detail}\n")
        elif self._progress is not None and event.phase != self._last_phase:
            self._last_phase = event.phase
            self._progress.console.print(f"[dim]{event.phase}[/dim] {event.message or event.asset}")
