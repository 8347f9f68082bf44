"""The argument parser: the top level from a static table, and only the named command's own.

Building every command's parser costs more than the interpreter's start-up; a run needs one.
``commands.COMMANDS`` lists each command with its help and module, so ``--help`` and an unknown
command's did-you-mean see them all while only the command being run is built in full.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn, TypeAlias

from .._version import __version__
from . import commands

# A check of a command's arguments together (``--platform`` needs ``--dry-run``): the usage
# error's text, or ``None``. Set with ``usage_check``; run once the command is parsed.
Check: TypeAlias = Callable[[argparse.Namespace], str | None]

__all__ = [
    "HelpFormatter",
    "RawDescriptionHelpFormatter",
    "UsageError",
    "build_parser",
    "command_of",
    "stand_in",
    "usage_check",
    "wants_json",
]


class UsageError(SystemExit):
    """A usage error already printed as one ``error:`` line; exit status 2 (SPEC §13)."""

    def __init__(self, message: str) -> None:
        super().__init__(2)
        self.message = message


def _columns() -> int:
    """The terminal's width as ``shutil.get_terminal_size`` finds it (``COLUMNS``, then the
    terminal of stdout, else 80), without importing shutil: argparse's formatters ask it, and
    its archive support (zlib, bz2, lzma: three extension modules) is a tenth of ``--help``."""
    try:
        columns = int(os.environ.get("COLUMNS", ""))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or 80


class _Width:
    """A formatter given the width argparse would compute (:func:`_columns`, less 2)."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24) -> None:
        super().__init__(prog, indent_increment, max_help_position, _columns() - 2)  # type: ignore[call-arg]


class HelpFormatter(_Width, argparse.HelpFormatter):
    """argparse's formatter, without the import of shutil."""


class RawDescriptionHelpFormatter(_Width, argparse.RawDescriptionHelpFormatter):
    """argparse's formatter that keeps the description's lines, without the import of shutil."""


class _Parser(argparse.ArgumentParser):
    """argparse, but usage errors are one ``error:`` line and exit status 2 (SPEC §13).

    Every parser, the top one and each subcommand's, carries the global options, so they are
    accepted before the command and after it up to the command's first operand (SPEC §13), and
    listed by every ``--help``. Below the top, their defaults are ``SUPPRESS``: a value given
    before the command is not reset by the subparser.
    """

    def __init__(self, *args: Any, top: bool = False, stub: bool = False, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)
        self._operand_seen = False
        self._globals: tuple[argparse.Action, ...] = ()
        self.stub = stub
        if not stub:  # a stand-in for a command not being run is never parsed with
            self._globals = _add_global_options(self, top=top)

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        self._operand_seen = False  # each parse (the top's, then the command's) starts anew
        return super().parse_known_args(args, namespace)

    def _get_values(self, action: argparse.Action, arg_strings: list[str]) -> Any:
        """argparse hands every argument to this, in the order of the command line: a global
        option after an operand is refused here, so a value a script put after the operands
        (a model id ``--config=x``) can never redirect the config or the data home."""
        if not action.option_strings:
            if any(word != "--" for word in arg_strings):
                self._operand_seen = True
        elif self._operand_seen and action in self._globals:
            name = "/".join(action.option_strings)
            self.error(
                f"{name} after an operand is not read as an option: give global options before "
                'the operands, and put "--" before an operand that starts with "-"'
            )
        return super()._get_values(action, arg_strings)

    def parse_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> argparse.Namespace:
        """As argparse, but an unknown option and a check of the command's arguments are
        reported by the command's own parser: its ``--help`` is the one that lists them."""
        parsed, extras = self.parse_known_args(args, namespace)
        command = _command_parser(self, parsed)
        if extras:
            from ..errors import close_matches, did_you_mean

            known = [o for a in command._actions for o in a.option_strings if o[:2] == "--"]
            flags = [e.split("=", 1)[0] for e in extras if e.startswith("-")]
            if flags and flags[0] in known:  # the command's own option, typed before it
                command.error(
                    f"{flags[0]} is an option of '{command.prog}': put it after "
                    f"'{command.prog.split()[-1]}'"
                )
            best = close_matches(flags[0], known, limit=1) if flags else []  # one, not three
            close = did_you_mean(flags[0], best) if flags else ""  # an extra operand: none
            command.error(f"unrecognized arguments: {' '.join(extras)}{close}")
        for check in getattr(parsed, "usage_checks", ()):
            problem = check(parsed)
            if problem:
                command.error(problem)
        return parsed

    def error(self, message: str) -> NoReturn:
        see = f"see '{self.prog} --help'"
        line = f"{message} ({see})" if message.endswith("?") else f"{message}; {see}"
        sys.stderr.write(f"error: {line}\n")
        raise UsageError(line)

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        choices = action.choices
        if choices is not None and value not in choices:
            from ..errors import did_you_mean  # a mistake's words: not loaded by --help

            names = [str(c) for c in choices if not str(c).startswith("__")]  # hidden ones
            hint = did_you_mean(str(value), names) or f"; choose from {', '.join(names)}"
            if isinstance(action, argparse._SubParsersAction):
                raise argparse.ArgumentError(None, f'unknown command "{value}"{hint}')
            raise argparse.ArgumentError(action, f'invalid choice "{value}"{hint}')


def _command_parser(
    parser: argparse.ArgumentParser, parsed: argparse.Namespace
) -> argparse.ArgumentParser:
    """The innermost parser ``parsed`` went through (``backends add``'s, ``install``'s)."""
    while True:
        sub = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
        name = getattr(parsed, sub.dest, None) if sub is not None else None
        if sub is None or name not in sub.choices:
            return parser
        parser = sub.choices[name]


def stand_in(parser: argparse.ArgumentParser) -> bool:
    """Whether ``parser`` stands in for a command not being run (:func:`build_parser`): it is
    never parsed with, so the arguments a command's module would add to it go unused."""
    return isinstance(parser, _Parser) and parser.stub


def usage_check(parser: argparse.ArgumentParser, check: Check) -> None:
    """Run ``check`` on the parsed arguments of ``parser``'s command (exit 2 when it fails)."""
    checks = parser.get_default("usage_checks") or ()
    parser.set_defaults(usage_checks=(*checks, check))


def _add_global_options(
    parser: argparse.ArgumentParser, *, top: bool
) -> tuple[argparse.Action, ...]:
    group = parser.add_argument_group("global options (before the command's operands)")

    def default(value: object) -> object:
        return value if top else argparse.SUPPRESS

    config = group.add_argument(
        "--config",
        metavar="PATH",
        default=default(None),
        help="config file (env BACKENDMGR_CONFIG)",
    )
    home = group.add_argument(
        "--home", metavar="PATH", default=default(None), help="data home (env BACKENDMGR_HOME)"
    )
    json = group.add_argument(
        "--json", action="store_true", default=default(False), help="print one JSON document"
    )
    quiet = group.add_argument(
        "-q", "--quiet", action="store_true", default=default(False), help="print only errors"
    )
    debug = group.add_argument(
        "--debug", action="store_true", default=default(False), help="show tracebacks"
    )
    return config, home, json, quiet, debug


def command_of(words: Sequence[str]) -> str:
    """The command word in ``words`` (global options may come first, as argparse reads
    them: ``--conf PATH`` is ``--config PATH``), or ``""``."""
    if words and not words[0].startswith("-"):  # the command first: no grammar to load
        return words[0] if words[0] in commands.COMMANDS else ""
    if not any(word in commands.COMMANDS for word in words):  # ``--help``: no command at all
        return ""
    from .complete import option_of
    from .grammar import GRAMMAR

    i = 0
    while i < len(words):
        word = words[i]
        if word == "--":
            return ""
        option = option_of(GRAMMAR[""], word) if word.startswith("--") else None
        if option is not None and option[2] != 0 and "=" not in word:
            i += 2
            continue
        if not word.startswith("-"):
            return word if word in commands.COMMANDS else ""
        i += 1
    return ""


def build_parser(words: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser for ``words``: the top level and the named command's parser (every
    command's when ``words`` is ``None``)."""
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
    """Whether ``--json`` was given (or a prefix argparse reads as it: ``--js``), read before
    parsing so usage errors can honour it."""
    from .complete import option_of
    from .grammar import COMMON

    args = list(argv)
    if "--" in args:
        args = args[: args.index("--")]
    options = (option_of(COMMON, word) for word in args if word.startswith("--"))
    return any(option is not None and option[1] == "json" for option in options)
