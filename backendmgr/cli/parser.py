"""The argument parser: the top level from a static table, and only the named command's own.

Building every command's parser costs more than the interpreter's start-up; a run needs one.
``commands.COMMANDS`` lists each command with its help and module, so ``--help`` and an unknown
command's did-you-mean see them all while only the command being run is built in full.
"""

from __future__ import annotations

import argparse
import functools
import gettext
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from .._version import __version__

__all__ = ["UsageError", "build_parser", "command_of", "wants_json"]

# argparse looks its own strings up through gettext for every parser it builds, and each lookup
# searches the locale folders on disk again: with ~35 subcommands that was 40 % of building the
# parser. The answer cannot change within one run, so it is looked up once per string.
argparse._ = functools.cache(gettext.gettext)  # type: ignore[attr-defined]


class UsageError(SystemExit):
    """A usage error already printed as one ``error:`` line; exit status 2 (SPEC §13)."""

    def __init__(self, message: str) -> None:
        super().__init__(2)
        self.message = message


class _Parser(argparse.ArgumentParser):
    """argparse, but usage errors are one ``error:`` line and exit status 2 (SPEC §13).

    Every parser, the top one and each subcommand's, carries the global options, so they are
    accepted before or after the command and listed by every ``--help``. Below the top, their
    defaults are ``SUPPRESS``: a value given before the command is not reset by the subparser.
    """

    def __init__(self, *args: Any, top: bool = False, stub: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if not stub:  # a stand-in for a command not being run is never parsed with
            _add_global_options(self, top=top)

    def error(self, message: str) -> NoReturn:
        see = f"see '{self.prog} --help'"
        line = f"{message} ({see})" if message.endswith("?") else f"{message}; {see}"
        sys.stderr.write(f"error: {line}\n")
        raise UsageError(line)

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        choices = action.choices
        if choices is not None and value not in choices:
            from ..errors import did_you_mean

            names = [str(c) for c in choices if not str(c).startswith("__")]  # hidden ones
            hint = did_you_mean(str(value), names) or f"; choose from {', '.join(names)}"
            if isinstance(action, argparse._SubParsersAction):
                raise argparse.ArgumentError(None, f'unknown command "{value}"{hint}')
            raise argparse.ArgumentError(action, f'invalid choice "{value}"{hint}')


def _add_global_options(parser: argparse.ArgumentParser, *, top: bool) -> None:
    group = parser.add_argument_group("global options (before or after the command)")

    def default(value: object) -> object:
        return value if top else argparse.SUPPRESS

    group.add_argument(
        "--config",
        metavar="PATH",
        default=default(None),
        help="config file (env BACKENDMGR_CONFIG)",
    )
    group.add_argument(
        "--home", metavar="PATH", default=default(None), help="data home (env BACKENDMGR_HOME)"
    )
    group.add_argument(
        "--json", action="store_true", default=default(False), help="print one JSON document"
    )
    group.add_argument(
        "-q", "--quiet", action="store_true", default=default(False), help="print only errors"
    )
    group.add_argument(
        "--debug", action="store_true", default=default(False), help="show tracebacks"
    )


def command_of(words: Sequence[str]) -> str:
    """The command word in ``words`` (global options may come first), or ``""``."""
    from .commands import COMMANDS

    i = 0
    while i < len(words):
        word = words[i]
        if word == "--":
            return ""
        if word in ("--config", "--home"):
            i += 2
            continue
        if not word.startswith("-"):
            return word if word in COMMANDS else ""
        i += 1
    return ""


def build_parser(words: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser for ``words``: the top level and the named command's parser (every
    command's when ``words`` is ``None``)."""
    from . import commands

    parser = _Parser(
        prog="backendmgr",
        description="Install and version local inference backends; keep llama-swap's config right.",
        top=True,
    )
    parser.add_argument("--version", action="version", version=f"backendmgr {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    commands.register(sub, None if words is None else command_of(words))
    return parser


def wants_json(argv: Sequence[str]) -> bool:
    """Whether ``--json`` was given, read before parsing so usage errors can honour it."""
    args = list(argv)
    if "--" in args:
        args = args[: args.index("--")]
    return "--json" in args
