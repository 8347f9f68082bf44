"""Helpers every command uses: declaring a command, and rendering an :class:`Outcome` or a list
of rows (a command's options come from its request: :mod:`backendmgr.cli.options`)."""

from __future__ import annotations

import argparse
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from ...manager import Manager
    from ...results import Outcome, Result
    from ..render import Renderer

    T = TypeVar("T", bound=Result)
    # a command's handler: a coroutine, or a plain function for a read (run with no event loop)
    Handler = Callable[[Manager, argparse.Namespace, Renderer], Awaitable[int] | int]


def command(
    sub: argparse._SubParsersAction[Any], name: str, handler: Handler, **options: Any
) -> argparse.ArgumentParser:
    """The parser of one command, set to run ``handler``; ``options`` go to ``add_parser``."""
    parser: argparse.ArgumentParser = sub.add_parser(name, **options)
    parser.set_defaults(handler=handler)
    return parser


def add_no_generate(parser: argparse.ArgumentParser) -> None:
    """``--no-generate`` of a command not yet built from its request (``tune``)."""
    parser.add_argument(
        "--no-generate", action="store_true", help="do not regenerate the llama-swap config"
    )


def report(out: Renderer, outcome: Outcome) -> int:
    from ...api_models import dump
    from ...changes import current

    for warning in outcome.warnings:  # on stderr, and in the --json document for scripts
        out.warning(warning)
    record = current()  # what the command changed on disk (issue 33)
    if record is not None and outcome.changes is None and record.document():
        outcome.changes = record.document()
    if out.json_mode:
        out.document(dump(outcome))
    else:
        out.info(outcome.message)
        for line in record.lines() if record is not None else ():
            out.info(f"  {line}")
        diff = getattr(outcome, "diff", None)  # a dry run's: the config file, as diff -u
        if diff:
            out.info(diff.rstrip("\n"))
    return 0


def table(
    out: Renderer,
    rows: Sequence[T],
    columns: Sequence[str],
    cells: Callable[[T], Sequence[Any]],
    *,
    empty: str,
) -> int:
    """``rows`` as one JSON document, or as a table of ``cells(row)`` under ``columns``."""
    from ...api_models import dump

    if out.json_mode:
        out.document(dump(rows))
    else:
        out.table(columns, [cells(r) for r in rows], empty=empty)
    return 0
