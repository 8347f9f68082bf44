"""Everything the CLI prints: JSON documents, rich tables, one-line messages and errors."""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from ..api_models import InstallResult

__all__ = [
    "ProgressView",
    "Renderer",
    "json_error",
    "plain_table",
]


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

        class _Console(Console):
            def on_broken_pipe(self) -> None:
                """rich would exit 1 here; the command's boundary ends a closed stdout as
                every command does (main.CLOSED_STDOUT)."""
                self.quiet = True
                raise BrokenPipeError

        width = None if self.is_terminal else 200
        return _Console(file=self.stdout, highlight=False, soft_wrap=False, width=width)

    def document(self, data: Any) -> None:
        self.stdout.write(json.dumps(data, indent=2, default=str, ensure_ascii=False) + "\n")

    def info(self, message: str) -> None:
        if not self.quiet and not self.json_mode:
            self.stdout.write(message + "\n")

    def note(self, message: str) -> None:
        """A status line for people (progress, summaries): stderr, so stdout stays the result."""
        if not self.quiet and not self.json_mode:
            self.stderr.write(message + "\n")

    def waiting(self, message: str) -> None:
        """What a slow step waits for (issue 20), for a person at a terminal: a line on stderr,
        none in a pipe, with ``--json`` or ``-q``. The text names paths a config chose, so
        nothing in it can drive the terminal."""
        if self.stderr.isatty():
            self.note(printable(message))

    def warning(self, message: str) -> None:
        if self.quiet:  # -q: only errors
            return
        self.stderr.write("warning: " + " ".join(message.split("\n")) + "\n")

    def error(self, message: str) -> None:
        self.stderr.write("error: " + " ".join(message.split("\n")) + "\n")

    def failure(self, message: str, code: int) -> int:
        """An ``error:`` line; with ``--json`` also ``{"error", "exit"}`` on stdout (SPEC §13)."""
        self.error(message)
        if self.json_mode:
            json_error(self.stdout, message, code)
        return code

    def table(self, columns: Sequence[str], rows: Sequence[Sequence[Any]], *, empty: str) -> None:
        if not rows:
            self.info(empty)
            return
        cells = [["" if cell is None else str(cell) for cell in row] for row in rows]
        if not self.is_terminal:
            plain = plain_table(columns, cells, self.stdout)
            if plain is not None:
                self.stdout.write(plain)
                return
        from rich import box
        from rich.table import Table

        table = Table(box=box.SIMPLE_HEAD if self.is_terminal else box.ASCII2)
        for column in columns:
            table.add_column(column, overflow="fold")
        for row in cells:
            table.add_row(*row)
        self.console().print(table)


PIPE_WIDTH = 200  # what rich is given in a pipe: a wider table folds its cells

# Drawn one cell wide by rich, as by this module (tests/cli/test_render.py holds them equal)
_NARROW = frozenset("★…→±§")
# Where rich would read markup (``[bold]``) or an emoji code (``:smile:``): rich draws it.
# This and :data:`_WORD` are compiled by the first table (re's cache): a command that prints
# none (``which``) compiles neither.
_RICH_TEXT = r"\[|:\S*?:"


def plain_table(
    columns: Sequence[str], rows: Sequence[Sequence[str]], stream: TextIO
) -> str | None:
    """The table rich draws in a pipe (``box.ASCII2``, no colour), drawn without loading rich
    (about a third of a read that prints 200 rows), or ``None`` where only rich knows the
    answer: a cell rich would read as markup, other characters than printable ASCII and
    :data:`_NARROW`, a table so wide that a column would shrink below one character, or an
    environment asking for colour in a pipe. A table wider than :data:`PIPE_WIDTH` is narrowed
    and its cells folded as rich does (:func:`_fitted`, :func:`_folded`)."""
    if os.environ.get("FORCE_COLOR") is not None or os.environ.get("TTY_COMPATIBLE") == "1":
        return None
    utf8 = (getattr(stream, "encoding", None) or "").lower().replace("-", "") == "utf8"
    rich_text = re.compile(_RICH_TEXT)
    texts = [list(columns), *rows]
    for row in texts:
        if len(row) != len(columns):
            return None
        for text in row:
            if not (text.isascii() and text.isprintable()) and not (
                utf8 and all(ch in _NARROW or (ch.isascii() and ch.isprintable()) for ch in text)
            ):
                return None
            if rich_text.search(text):
                return None
    widths = [max(len(row[i]) for row in texts) for i in range(len(columns))]
    if sum(widths) + 3 * len(widths) + 1 > PIPE_WIDTH:
        fitted = _fitted([w + 2 for w in widths], PIPE_WIDTH - len(widths) - 1)
        if fitted is None:
            return None
        widths = [w - 2 for w in fitted]
    rule = "+" + "+".join("-" * (w + 2) for w in widths) + "+\n"
    words = re.compile(_WORD)

    def line(row: Sequence[str], header: bool = False) -> str:
        """One row, its cells folded; rich aligns the header's to the bottom, the rest top."""
        cells = [_folded(text, w, words) for text, w in zip(row, widths, strict=True)]
        height = max(len(c) for c in cells)
        blank = [[" " * w] * (height - len(c)) for c, w in zip(cells, widths, strict=True)]
        cells = [b + c if header else c + b for c, b in zip(cells, blank, strict=True)]
        return "".join("|" + "|".join(f" {c[i]} " for c in cells) + "|\n" for i in range(height))

    return rule + line(columns, header=True) + rule + "".join(line(row) for row in rows) + rule


def _fitted(widths: list[int], room: int) -> list[int] | None:
    """The column widths (padding included) rich gives a table too wide for ``room``: the
    widest columns shrink first, to the next widest, until it fits (rich's
    ``Table._collapse_widths``); ``None`` where a column would keep less than one character."""
    widths = [min(w, room) for w in widths]  # rich measures each column within the room
    excess = sum(widths) - room
    while excess > 0:
        widest = max(widths)
        second = max((w for w in widths if w != widest), default=0)
        if widest == second:
            break
        ratios = [1 if w == widest else 0 for w in widths]
        widths = _ratio_reduce(excess, ratios, min(excess, widest - second), widths)
        excess = sum(widths) - room
    if excess > 0 or min(widths) < 3:  # rich's last resort (shrinking every column) not drawn
        return None
    return widths


def _ratio_reduce(total: int, ratios: list[int], most: int, values: list[int]) -> list[int]:
    """rich's ``ratio_reduce`` with one maximum for every column: ``total`` taken from the
    columns in proportion to ``ratios``, at most ``most`` from each."""
    left, ratio_left = total, sum(ratios)
    out = []
    for ratio, value in zip(ratios, values, strict=True):
        if ratio and ratio_left > 0:
            taken = min(most, round(ratio * left / ratio_left))
            out.append(value - taken)
            left -= taken
            ratio_left -= ratio
        else:
            out.append(value)
    return out


_WORD = r"\s*\S+\s*"  # a word and the spaces around it (``words`` of :func:`_folded`)


def _folded(text: str, width: int, words: re.Pattern[str]) -> list[str]:
    """``text`` as rich wraps a cell ``width`` characters wide with ``overflow="fold"``: broken
    before the word that does not fit, a word longer than a line cut into pieces, each line
    padded to ``width`` (rich's ``divide_line``, ``Text.rstrip_end`` and ``truncate``)."""
    if len(text) <= width:
        return [text.ljust(width)]
    breaks: list[int] = []
    offset = 0
    for match in words.finditer(text):
        start, word = match.start(), match.group(0)
        length = len(word.rstrip())
        if width - offset >= length:
            offset += len(word)
        elif length > width:
            pieces = [word[i : i + width] for i in range(0, len(word), width)]
            for n, piece in enumerate(pieces):
                if start:
                    breaks.append(start)
                if n == len(pieces) - 1:
                    offset = len(piece)
                else:
                    start += len(piece)
        elif offset and start:
            breaks.append(start)
            offset = len(word)
    lines = []
    for begin, end in zip([0, *breaks], [*breaks, len(text)], strict=True):
        piece = text[begin:end]
        if len(piece) > width:
            spaces = len(piece) - len(piece.rstrip())
            piece = piece[: len(piece) - min(spaces, len(piece) - width)]
        lines.append(piece[:width].ljust(width))
    return lines


def printable(message: str) -> str:
    """``message`` with each character that could drive a terminal shown as ``?``."""
    return "".join(ch if ch.isprintable() else "?" for ch in message)


def json_error(stream: TextIO, message: str, code: int) -> None:
    """The failure document of ``--json``: one JSON object, same text as the ``error:`` line."""
    stream.write(json.dumps({"error": " ".join(message.split("\n")), "exit": code}) + "\n")


class ProgressView:
    """Draws install events: rich bars on a terminal, one line per phase otherwise."""

    def __init__(self, out: Renderer) -> None:
        self.out = out
        self.live = out.is_terminal and not out.quiet and not out.json_mode
        self._progress: Any = None
        self._tasks: dict[str, Any] = {}
        self._last: dict[str, tuple[str, str]] = {}  # per build: the phase and message shown
        self._installing: set[str] = set()  # builds whose installer output was summarised
        # per (build, asset): bytes a .part held before this run, and bytes reached so far
        self._resumed: dict[tuple[str, str], int] = {}
        self._reached: dict[tuple[str, str], int] = {}

    @property
    def resumed_bytes(self) -> int:
        """Bytes of this run's downloads that an earlier run had already fetched."""
        return sum(self._resumed.values())

    @property
    def downloaded_bytes(self) -> int:
        """Bytes fetched by this run (a resumed download counts from where it resumed)."""
        return sum(n - self._resumed.get(key, 0) for key, n in self._reached.items())

    def __enter__(self) -> ProgressView:
        if self.live:
            from rich.progress import (
                BarColumn,
                DownloadColumn,
                Progress,
                TaskProgressColumn,
                TextColumn,
                TimeRemainingColumn,
            )

            self._progress = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                TaskProgressColumn(),
                DownloadColumn(binary_units=True),
                _speed_column(),
                TimeRemainingColumn(),
                console=self.out.console(),
                transient=True,
            )
            self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()

    def __call__(self, event: Any) -> None:
        build = event.build
        # concurrent installs (sync) share this view: each line names its build
        prefix = f"{build}: " if build else ""
        if event.phase in ("failed", "cancelled"):
            return  # the error line says why; printing it here too would say it twice
        if event.phase == "downloading" and event.message and not event.asset:
            # installer output (pip / uv): streamed on a terminal, summarised otherwise
            if self._progress is not None:
                self._note(prefix + event.message)
            elif build not in self._installing and not self.out.quiet and not self.out.json_mode:
                self._installing.add(build)
                self.out.stderr.write(f"{prefix}installing\n")
            return
        message = event.message
        if event.phase == "downloading" and event.asset:
            key = (build, event.asset)
            if message and not self._reached.get(key):  # a .part from an earlier run
                self._resumed[key] = event.bytes_done
            self._reached[key] = max(self._reached.get(key, 0), event.bytes_done)
            if message:
                self._note(prefix + message)  # e.g. "resuming … at 12.6 MiB of 42.0 MiB"
                message = ""
        if self._progress is not None and event.phase == "downloading" and event.asset:
            task = self._tasks.get(event.asset)
            if task is None:
                task = self._progress.add_task(event.asset, total=event.bytes_total)
                self._tasks[event.asset] = task
            self._progress.update(task, completed=event.bytes_done, total=event.bytes_total)
            return
        phase, shown = self._last.get(build, ("", ""))
        if event.phase == phase:
            # one line per phase, plus any new message within it (waiting for a lock), which
            # reads on its own: "waiting for another backendmgr (pid N) …"
            if message not in ("", shown):
                self._last[build] = (phase, message)
                self._note(prefix + message)
            return
        self._last[build] = (event.phase, message)
        self._note(f"{prefix}{event.phase} {message or event.asset}".rstrip(), indent="")

    def _note(self, message: str, indent: str = "  ") -> None:
        """One line of progress, above the bars or on stderr; the text holds names a server or
        an installer chose, so nothing in it can drive the terminal or rich's markup."""
        message = printable(message)
        if self._progress is not None:
            from rich.markup import escape

            self._progress.console.print(f"[dim]{indent}{escape(message)}[/dim]", highlight=False)
        elif not self.out.quiet and not self.out.json_mode:
            self.out.stderr.write(message + "\n")


_VERIFIED = {
    "digest": "the published digest",
    "checksums": "the published checksums file",
    "none": "nothing (none published; SHA-256 recorded)",
    "None": "nothing",
}


def _speed_column() -> Any:
    """rich's speed column in the units ``format_size`` uses, so one unit system is on screen."""
    from rich.progress import ProgressColumn
    from rich.text import Text

    from ..units import format_size

    class SpeedColumn(ProgressColumn):
        def render(self, task: Any) -> Text:
            speed = task.finished_speed or task.speed
            return Text(
                "?" if speed is None else f"{format_size(speed)}/s", style="progress.data.speed"
            )

    return SpeedColumn()


def install_summary(
    result: InstallResult, seconds: float, view: ProgressView | None = None
) -> str | None:
    """One line after a finished install: size, time, average speed and how it was verified.
    The speed counts only what this run fetched (``view``'s count): bytes resumed from an
    earlier run's ``.part`` arrived before the clock started."""
    if result.dry_run or result.already_installed:
        return None
    from ..units import format_duration, format_size  # an install's words: no read loads them

    assets = result.assets
    total = sum(a.size or 0 for a in assets)
    checks = sorted({_VERIFIED.get(str(a.verified_by), "?") for a in assets})
    verified = ", ".join(checks) if checks else "its installer"
    fetched = total if view is None else view.downloaded_bytes
    speed = f", {format_size(fetched / seconds)}/s" if fetched and seconds > 0 else ""
    size = format_size(total) if assets else "a virtual environment"
    if view is not None and view.resumed_bytes:
        size += f" ({format_size(view.resumed_bytes)} of it resumed)"
    return f"{result.id}: {size} in {format_duration(seconds)}{speed}; verified by {verified}"
