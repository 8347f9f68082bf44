"""Command-line entry point: parse arguments, call the Manager, render, map exit codes.

Every command computes its answer live. Heavy modules (pydantic, httpx, rich) are imported
only by the commands that need them, so ``backendmgr --help`` and <TAB> start about as fast as
the interpreter and never touch the data home.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import argparse

__all__ = ["main"]

CLOSED_STDOUT = 128 + 13
"""The status a shell gives a program that SIGPIPE stopped: ``backendmgr status | head -1``
ends as ``cat`` would there, quietly."""


def _closed_stdout(exc: BaseException) -> bool:
    """Whether ``exc`` (or every exception in its group) says the reader of stdout is gone."""
    if isinstance(exc, BaseExceptionGroup):
        return all(_closed_stdout(e) for e in exc.exceptions)
    return isinstance(exc, BrokenPipeError)


def _quiet_after_closed_stdout() -> int:
    """Point stdout at the null device, so the interpreter's last flush has nowhere to fail."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    return CLOSED_STDOUT


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command (``argv``: the words after the program name; default ``sys.argv``)."""
    try:
        code = _main(list(sys.argv[1:] if argv is None else argv))
        sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's last flush
        return code
    except KeyboardInterrupt:  # before the renderer exists (start-up, parsing): one line too
        sys.stderr.write("error: cancelled\n")
        return 130
    except BrokenPipeError:  # the reader went away (| head): not an error of ours
        return _quiet_after_closed_stdout()


def _main(words: list[str]) -> int:
    if words[:2] == ["__complete", "--"]:  # the scripts' call at every <TAB>: no parser
        from .complete import complete

        return complete(words[1:], sys.stdout)
    from .parser import UsageError, build_parser, wants_json

    parser = build_parser(words)
    try:
        args = parser.parse_args(words)
    except UsageError as exc:
        if wants_json(words):
            from .render import json_error

            json_error(sys.stdout, exc.message, 2)
        return 2
    if not getattr(args, "handler", None):
        parser.print_help()
        return 2
    if args.command == "__complete":  # after global options: no event loop, no renderer
        from .complete import complete

        return complete(args.words, sys.stdout, args.config, args.home)
    from .render import Renderer

    out = Renderer(json_mode=args.json, quiet=args.quiet)
    try:
        return run(args, out)
    except KeyboardInterrupt:
        return out.failure("cancelled", 130)


def run(args: argparse.Namespace, out: object) -> int:
    """Run the parsed command: a read (a plain function) is called as it is, an edit with no
    llama-swap to follow up is driven inline (no event loop, issue 30), anything else runs on
    an event loop, followed by the reload proof a mutation needs (issue 21)."""
    import inspect

    from .render import Renderer

    assert isinstance(out, Renderer)
    try:
        from ..config.paths import Paths
        from ..manager import Manager

        paths = Paths.resolve(config=args.config, home=args.home)
        # a config file that is not there is an empty config, however it was named (SPEC §2)
        manager = Manager(paths, on_wait=out.waiting)
        if not inspect.iscoroutinefunction(args.handler):
            read: int = args.handler(manager, args, out)
            return read
        from .commands.swap import runs_inline, with_follow_up

        if runs_inline(manager, args):  # an edit with no llama-swap to tell: no event loop
            from .._inline import run_inline

            edit: int = run_inline(with_follow_up(args.handler, quiet=True)(manager, args, out))
            return edit
        import anyio

        code: int = anyio.run(with_follow_up(args.handler), manager, args, out)
        return code
    except (SystemExit, GeneratorExit):
        raise
    except BaseException as exc:  # the one boundary: every error is one line (SPEC §13)
        if _closed_stdout(exc):
            return _quiet_after_closed_stdout()
        if args.debug:
            raise
        from ..boundary import failure_of

        failure = failure_of(exc)
        return out.failure(failure.message, failure.exit_code)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
