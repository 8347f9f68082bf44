"""Command-line entry point: parse arguments, call the Manager, render, map exit codes.

Heavy modules (pydantic, httpx, rich) are imported only by the commands that need them, so
``backendmgr --help`` starts about as fast as the interpreter.
"""

from __future__ import annotations

import argparse
import functools
import gettext
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from .._version import __version__

__all__ = ["main"]

# argparse looks its own strings up through gettext for every parser it builds, and each lookup
# searches the locale folders on disk again: with ~35 subcommands that was 40 % of building the
# parser. The answer cannot change within one run, so it is looked up once per string.
argparse._ = functools.cache(gettext.gettext)  # type: ignore[attr-defined]


class _UsageError(SystemExit):
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

    def __init__(self, *args: Any, top: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _add_global_options(self, top=top)

    def error(self, message: str) -> NoReturn:
        see = f"see '{self.prog} --help'"
        line = f"{message} ({see})" if message.endswith("?") else f"{message}; {see}"
        sys.stderr.write(f"error: {line}\n")
        raise _UsageError(line)

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


def build_parser() -> argparse.ArgumentParser:
    from . import commands

    parser = _Parser(
        prog="backendmgr",
        description="Install and version local inference backends; keep llama-swap's config right.",
        top=True,
    )
    parser.add_argument("--version", action="version", version=f"backendmgr {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    commands.register(sub)
    return parser


def _wants_json(argv: Sequence[str]) -> bool:
    """Whether ``--json`` was given, read before parsing so usage errors can honour it."""
    args = list(argv)
    if "--" in args:
        args = args[: args.index("--")]
    return "--json" in args


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return _main(argv)
    except KeyboardInterrupt:  # before the renderer exists (start-up, parsing): one line too
        sys.stderr.write("error: cancelled\n")
        return 130


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    words = list(sys.argv[1:] if argv is None else argv)
    try:
        args = parser.parse_args(words)
    except _UsageError as exc:
        if _wants_json(words):
            from .render import json_error

            json_error(sys.stdout, exc.message, 2)
        return 2
    if not getattr(args, "handler", None):
        parser.print_help()
        return 2
    if args.command == "__complete":  # at every <TAB>: no event loop, no renderer
        from .commands.completion import complete_now

        return complete_now(args, sys.stdout)
    from .render import Renderer

    out = Renderer(json_mode=args.json, quiet=args.quiet)
    try:
        return run(args, out)
    except KeyboardInterrupt:
        return out.failure("cancelled", 130)


def run(args: argparse.Namespace, out: object) -> int:
    import anyio

    from ..errors import BackendmgrError
    from .render import Renderer

    assert isinstance(out, Renderer)
    try:
        from ..config.paths import Paths
        from ..manager import Manager

        manager = Manager(Paths.resolve(config=args.config, home=args.home))
        from .commands.swap import with_follow_up

        code: int = anyio.run(with_follow_up(args.handler), manager, args, out)
        return code
    except BaseExceptionGroup as group:
        first: BaseException = group
        while isinstance(first, BaseExceptionGroup):
            first = first.exceptions[0]
        if args.debug or not isinstance(first, BackendmgrError):
            raise
        return out.failure(str(first), first.exit_code)
    except BackendmgrError as exc:
        if args.debug:
            raise
        return out.failure(str(exc), exc.exit_code)
    except OSError as exc:
        if args.debug:
            raise
        where = f" ({exc.filename})" if exc.filename else ""
        return out.failure(f"{exc.strerror or exc}{where}", 1)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
