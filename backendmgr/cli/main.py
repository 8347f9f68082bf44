"""Command-line entry point: parse arguments, call the Manager, render, map exit codes.

Heavy modules (pydantic, httpx, rich) are imported only by the commands that need them, so
``backendmgr --help`` starts about as fast as the interpreter.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import NoReturn

from .._version import __version__

__all__ = ["main"]


class _Parser(argparse.ArgumentParser):
    """argparse, but usage errors are one ``error:`` line and exit status 2 (SPEC §13)."""

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"error: {message}; see '{self.prog} --help'\n")
        raise SystemExit(2)


def build_parser() -> argparse.ArgumentParser:
    from . import commands

    parser = _Parser(
        prog="backendmgr",
        description="Install and version local inference backends; keep llama-swap's config right.",
    )
    parser.add_argument("--version", action="version", version=f"backendmgr {__version__}")
    parser.add_argument("--config", metavar="PATH", help="config file (env BACKENDMGR_CONFIG)")
    parser.add_argument("--home", metavar="PATH", help="data home (env BACKENDMGR_HOME)")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument("-q", "--quiet", action="store_true", help="print only errors")
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    commands.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "handler", None):
        parser.print_help()
        return 2
    from .render import Renderer

    out = Renderer(json_mode=args.json, quiet=args.quiet)
    try:
        return run(args, out)
    except KeyboardInterrupt:
        out.error("cancelled")
        return 130


def run(args: argparse.Namespace, out: object) -> int:
    import anyio

    from ..errors import BackendmgrError
    from .render import Renderer

    assert isinstance(out, Renderer)
    try:
        from ..config.paths import Paths
        from ..manager import Manager

        manager = Manager(Paths.resolve(config=args.config, home=args.home))
        code: int = anyio.run(args.handler, manager, args, out)
        return code
    except BaseExceptionGroup as group:
        first: BaseException = group
        while isinstance(first, BaseExceptionGroup):
            first = first.exceptions[0]
        if args.debug or not isinstance(first, BackendmgrError):
            raise
        out.error(str(first))
        return first.exit_code
    except BackendmgrError as exc:
        if args.debug:
            raise
        out.error(str(exc))
        return exc.exit_code
    except OSError as exc:
        if args.debug:
            raise
        where = f" ({exc.filename})" if exc.filename else ""
        out.error(f"{exc.strerror or exc}{where}")
        return 1


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
