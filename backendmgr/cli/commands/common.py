"""Helpers every command uses: declaring a command and its shared options, building its
request from the parsed arguments, and rendering an :class:`Outcome` or a list of rows."""

from __future__ import annotations

import argparse
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from pydantic import BaseModel

    from ...limits import Bounds
    from ...manager import Manager
    from ...requests import Request
    from ...results import Outcome
    from ..render import Renderer

    R = TypeVar("R", bound=Request)
    T = TypeVar("T", bound=BaseModel)
    Handler = Callable[[Manager, argparse.Namespace, Renderer], Awaitable[int]]


def command(
    sub: argparse._SubParsersAction[Any], name: str, handler: Handler, **options: Any
) -> argparse.ArgumentParser:
    """The parser of one command, set to run ``handler``; ``options`` go to ``add_parser``."""
    parser: argparse.ArgumentParser = sub.add_parser(name, **options)
    parser.set_defaults(handler=handler)
    return parser


def add_count(
    parser: argparse.ArgumentParser, flag: str, bounds: Bounds, *, default: int, help: str
) -> None:
    """An ``N`` option checked against its :mod:`backendmgr.limits` bounds, as the API is."""
    parser.add_argument(flag, type=bounds.argument(), default=default, metavar="N", help=help)


def add_no_generate(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--no-generate", action="store_true", help="do not regenerate the llama-swap config"
    )


def add_dry_run(parser: argparse.ArgumentParser) -> None:
    """``--dry-run`` of a config change: the same checks, then what would change and the
    config file's diff; nothing written (issue 29)."""
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="check and say what would change (the config's diff), write nothing",
    )


def request_of(cls: type[R], args: argparse.Namespace, **given: Any) -> R:
    """``cls`` from the parsed arguments: each field from the option of the same name
    (``generate`` from ``--no-generate``), unless ``given`` names it."""
    fields = dict(given)
    for name in cls.model_fields:
        if name in fields:
            continue
        if name == "generate" and hasattr(args, "no_generate"):
            fields[name] = not args.no_generate
        elif hasattr(args, name):
            fields[name] = getattr(args, name)
    return cls.of(**fields)


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
