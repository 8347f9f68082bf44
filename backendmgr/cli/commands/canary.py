"""``activate BUILD --canary MODEL…``: the canary's options and its report (issue 32)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from ...limits import CANARY_TOLERANCE
from ..parser import usage_check
from .bench import RUN_OPTIONS, add_run_options

if TYPE_CHECKING:
    from ...manager import Manager
    from ..render import Renderer

__all__ = ["add_canary_options", "run_canary"]


def add_canary_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--canary",
        nargs="+",
        metavar="MODEL",
        help="move only these models first, verify and bench them on both builds, then "
        "promote (activate) or roll back",
    )
    parser.add_argument(
        "--tolerance",
        type=CANARY_TOLERANCE.argument(),
        metavar="PCT",
        help="with --canary: how much slower (percent) the new build may be (5)",
    )
    add_run_options(parser, defaults=False)
    usage_check(parser, _canary_usage)


def _canary_usage(args: argparse.Namespace) -> str | None:
    """A canary's option without ``--canary`` (it would be ignored), or one the canary cannot
    honour: refused before anything is installed or switched."""
    if args.canary is None:
        only = (("--tolerance", "tolerance"), *RUN_OPTIONS, ("--timeout", "timeout"))
        stray = [flag for flag, dest in only if getattr(args, dest) is not None]
        return f"{stray[0]} only applies with --canary" if stray else None
    if args.dry_run:
        return "--canary measures real starts; it has no --dry-run"
    if args.no_generate:  # the canary regenerates: verify runs the models as the file says
        return "--no-generate does not apply with --canary: it measures the generated config"
    if args.force:
        return "--force does not apply with --canary: a promotion keeps no flag the build lacks"
    return None


def _side(f: dict[str, Any] | None) -> str:
    if not f:
        return "not run"
    if not f["ok"]:
        return f"{f['build']}: failed ({f['reason']})"
    pp = f["prompt_per_second"]
    return (
        f"{f['build']}: prompt {'?' if pp is None else f'{pp:g}'} t/s, "
        f"generation {f['predicted_per_second']:g} t/s"
    )


async def run_canary(mgr: Manager, args: argparse.Namespace, out: Renderer) -> int:
    from ...api_models import dump
    from ...manager.canary import run_line
    from ...requests import CanaryRequest

    given = {
        "tolerance": args.tolerance,
        "repeat": args.repeat,
        "prompt_words": args.prompt,
        "tokens": args.tokens,
        "timeout": args.timeout,
    }
    request = CanaryRequest.of(
        build=args.build,
        models=list(args.canary),
        **{k: v for k, v in given.items() if v is not None},  # the request's defaults
    )

    def shown(model: str, build: str, n: int, run: Any) -> None:
        out.waiting(run_line(model, build, n, request.repeat, run))

    report = await mgr.canary(request, on_run=shown)
    if out.json_mode:
        out.document(dump(report))
    else:
        for c in report.comparison:
            slower = c["slower_pct"].get("predicted_per_second")
            note = "" if slower is None else f" ({slower:g} % slower)"
            out.info(f"{c['model']}: {_side(c['old'])} | {_side(c['new'])}{note}")
        if report.promoted:
            out.info(report.message)
        else:
            out.error(report.message)
    return 0 if report.promoted else 1
