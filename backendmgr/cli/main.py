"""Command-line entry point: parse arguments, call the Manager, render, map exit codes.

Heavy modules (pydantic, httpx, rich) are imported only by the commands that need them, so
``backendmgr --help`` starts about as fast as the interpreter.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # typing's own constant costs the import of typing (mypy: always_true)
if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence
    from typing import Any

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command. Called with no ``argv`` (the console script), a read command whose
    inputs are unchanged prints its stored output (:mod:`.fastread`) without loading the rest."""
    try:
        if argv is None:
            words = sys.argv[1:]
            if words[:2] == ["__complete", "--"] and _quick_completion(words[2:]):
                return 0
            from .fastread import help_text, replay

            if words in (["--help"], ["-h"]):  # the top level's, as argparse writes it
                sys.stdout.write(help_text(words, sys.stdout, _top_help))
                return 0
            code = replay(words, sys.stdout, sys.stderr)
            if code is not None:
                return code
        return _main(argv)
    except KeyboardInterrupt:  # before the renderer exists (start-up, parsing): one line too
        sys.stderr.write("error: cancelled\n")
        return 130


def _quick_completion(words: list[str]) -> bool:
    """<TAB> on a command name (the static table) or on a command's first id (the read memo),
    answered without building a parser; False leaves it to the full completion."""
    from .table import COMMANDS, FIRST_IDS

    if not words or any(w.startswith("-") for w in words):
        return False
    if len(words) == 1:
        shown = [name for name in COMMANDS if not name.startswith("_")]
    elif len(words) == 2 and words[0] in FIRST_IDS:
        from .fastread import cached_ids

        found = cached_ids(FIRST_IDS[words[0]])
        if not found:  # not stored, stale, or nothing to offer: the full walk decides
            return False
        shown = [name for name in dict.fromkeys(found) if name and name.isprintable()]
    else:
        return False
    for name in shown:
        if name.startswith(words[-1]):
            sys.stdout.write(name + "\n")
    return True


def _top_help() -> str:
    from .parser import build_parser

    return build_parser([]).format_help()


def _main(argv: Sequence[str] | None) -> int:
    from .parser import UsageError, build_parser, wants_json

    words = list(sys.argv[1:] if argv is None else argv)
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
    if args.command == "__complete":  # at every <TAB>: no event loop, no renderer
        from .commands.completion import complete_now

        return complete_now(args, sys.stdout)
    from .render import Renderer

    recording = None
    if argv is None:
        from .fastread import Tee, parse

        request = parse(words)
        if request is not None:
            recording = (request, Tee(sys.stdout), Tee(sys.stderr))
    if recording is None:
        out = Renderer(json_mode=args.json, quiet=args.quiet)
    else:
        tee_out: Any = recording[1]  # a Tee: written like the stream it wraps
        tee_err: Any = recording[2]
        out = Renderer(json_mode=args.json, quiet=args.quiet, stdout=tee_out, stderr=tee_err)
    try:
        return run(args, out, recording)
    except KeyboardInterrupt:
        return out.failure("cancelled", 130)


def run(args: argparse.Namespace, out: object, recording: object = None) -> int:
    import anyio

    from ..boundary import failure_of
    from .render import Renderer

    assert isinstance(out, Renderer)
    try:
        from ..config.paths import Paths
        from ..manager import Manager

        paths = Paths.resolve(config=args.config, home=args.home)
        # a config file that is not there is an empty config, however it was named (SPEC §2)
        manager = Manager(paths, on_wait=out.waiting)
        from .commands.swap import with_follow_up

        handler = with_follow_up(args.handler)  # the reload proof after a mutation (issue 21)
        if recording is not None:
            handler = _recorded(handler, recording)
        code: int = anyio.run(handler, manager, args, out)
        return code
    except (SystemExit, GeneratorExit):
        raise
    except BaseException as exc:  # the one boundary: every error is one line (SPEC §13)
        if args.debug:
            raise
        failure = failure_of(exc)
        return out.failure(failure.message, failure.exit_code)


def _recorded(handler: Any, recording: Any) -> Any:
    """``handler``, and its output stored for :mod:`.fastread` when its inputs held still."""
    from .fastread import inputs_of, start_recording

    async def run_and_store(manager: Any, args: argparse.Namespace, out: Any) -> int:
        request, stdout, stderr = recording
        started = None
        try:
            models_dirs, exes = inputs_of(await manager.settings())
            started = start_recording(
                request, stdout, stderr, models_dirs=models_dirs, executables=exes
            )
        except Exception:  # the command itself reports a config it cannot read
            started = None
        code: int = await handler(manager, args, out)
        if started is not None:
            started.finish(code)
        return code

    return run_and_store


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
