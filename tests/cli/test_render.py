"""A table in a pipe is drawn without rich (issue 30: a read imports rich only to draw on a
terminal), and it is the very table rich draws: compared here with rich itself on random
tables, and rich draws whatever the plain drawing cannot promise to draw alike."""

from __future__ import annotations

import io
import random

import pytest
from rich import box
from rich.console import Console
from rich.table import Table

from backendmgr.cli.render import PIPE_WIDTH, Renderer, plain_table


class Pipe(io.StringIO):
    """A pipe whose encoding is UTF-8, as ``sys.stdout`` is under a UTF-8 locale."""

    def __init__(self, encoding: str = "utf-8") -> None:
        super().__init__()
        self._encoding = encoding

    @property
    def encoding(self) -> str:
        return self._encoding


def drawn_by_rich(columns: list[str], rows: list[list[str]]) -> str:
    """What ``Renderer.table`` drew in a pipe before it could draw without rich."""
    table = Table(box=box.ASCII2)
    for column in columns:
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*row)
    out = Pipe()
    Console(file=out, highlight=False, soft_wrap=False, width=PIPE_WIDTH).print(table)
    return out.getvalue()


@pytest.fixture(autouse=True)
def no_colour_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    monkeypatch.delenv("TTY_COMPATIBLE", raising=False)


@pytest.mark.parametrize(
    ("seed", "spaces", "sizes", "most_columns", "least_drawn"),
    [
        (30, 2, [0, 3, 12, 40, 70], 7, 500),  # most tables: narrower than the pipe
        # wider than the pipe (``models`` with long reasons): rich shrinks the widest columns
        # and folds their cells, the header to the bottom of its row, the others to the top
        (31, 4, [3, 12, 40, 150, 400], 12, 200),
    ],
)
def test_the_plain_table_is_the_table_rich_draws(
    seed: int, spaces: int, sizes: list[int], most_columns: int, least_drawn: int
) -> None:
    rnd = random.Random(seed)
    alphabet = "abcXYZ019" + " " * spaces + "-_./;,()=@#*'\"`~★…→±§"
    drawn = 0
    for _ in range(1500 if seed == 30 else 600):
        width = rnd.choice(sizes)

        def word(width: int = width) -> str:
            return "".join(rnd.choice(alphabet) for _ in range(rnd.randint(0, width)))

        count = rnd.randint(1, most_columns)
        columns = [word() for _ in range(count)]
        rows = [[word() for _ in range(count)] for _ in range(rnd.randint(1, 4))]
        plain = plain_table(columns, rows, Pipe())
        if plain is not None:
            natural = sum(max(len(r[i]) + 3 for r in [columns, *rows]) for i in range(count))
            drawn += natural + 1 > PIPE_WIDTH if seed == 31 else 1  # folded, for seed 31
            assert plain == drawn_by_rich(columns, rows), (columns, rows)
    assert drawn > least_drawn  # the comparison is not vacuous


@pytest.mark.parametrize("width", [PIPE_WIDTH - 1, PIPE_WIDTH, PIPE_WIDTH + 1, 3 * PIPE_WIDTH])
def test_a_table_as_wide_as_the_pipe_or_wider_is_drawn_plain(width: int) -> None:
    columns, rows = ["x" * (width - 4)], [["y"]]
    assert plain_table(columns, rows, Pipe()) == drawn_by_rich(columns, rows)


def test_a_table_too_wide_to_keep_a_character_per_column_is_left_to_rich() -> None:
    columns = ["x" * 10] * 70  # rich's last resort shrinks every column below its padding
    assert plain_table(columns, [columns], Pipe()) is None


@pytest.mark.parametrize(
    ("cells", "encoding", "environ"),
    [
        (["[bold]m[/bold]"], "utf-8", {}),  # markup
        (["a :smile: b"], "utf-8", {}),  # an emoji code
        (["a\tb"], "utf-8", {}),  # a tab
        (["模"], "utf-8", {}),  # two cells wide
        (["★"], "ascii", {}),  # not ASCII, and the pipe is not UTF-8
        (["m"], "utf-8", {"FORCE_COLOR": "1"}),  # colour asked for in a pipe
        (["m"], "utf-8", {"TTY_COMPATIBLE": "1"}),
    ],
)
def test_rich_draws_what_the_plain_table_cannot_promise(
    cells: list[str], encoding: str, environ: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for key, value in environ.items():
        monkeypatch.setenv(key, value)
    assert plain_table(["c"], [cells], Pipe(encoding)) is None
    assert plain_table(["c", "d"], [["x"]], Pipe()) is None  # a short row: rich pads it


def test_the_renderer_draws_plain_in_a_pipe_and_rich_falls_back() -> None:
    out = Pipe()
    Renderer(stdout=out).table(["model", "why"], [["m1", None], ["m2", "a [b] c"]], empty="")
    assert out.getvalue() == drawn_by_rich(["model", "why"], [["m1", ""], ["m2", "a [b] c"]])
    out = Pipe()
    Renderer(stdout=out).table(["model", "why"], [["m1", 3]], empty="")
    assert out.getvalue() == drawn_by_rich(["model", "why"], [["m1", "3"]])
