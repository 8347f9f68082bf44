"""``activate BUILD --canary MODEL…``: the canary's options and its report (issue 32)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from ... import requests
from ...contract import args_of
from ...errors import InvalidInput
from ..options import add_fields, made
from ..parser import stand_in, usage_check

if TYPE_CHECKING:
    from ...manager import Manager
    from ..render import Renderer

__all__ = ["add_canary_options", "run_canary"]


def add_canary_options(parser: argparse.ArgumentParser) -> None:
    """The canary's fields on ``activate`` and ``update``; ``--canary`` itself is optional
    there (without it, the command is a plain activate or update)."""
    if stand_in(parser):  # update's, while a sibling in its module runs: its request unmade
        return
    canary = dict(args_of(requests.CanaryRequest))["models"]
    parser.add_argument(
        canary.flag or "--canary",
        dest="canary",
        action="extend",  # --canary a b, or --canary a --canary b (the second kept the last)
        nargs="+",
        metavar=canary.metavar,
        help=canary.text(),
    )
    add_fields(parser, requests.CanaryRequest, skip=("build", "models"), unset=True)
    usage_check(parser, _canary_usage)


def _canary_usage(args: argparse.Namespace) -> str | None:
    """A canary's option without ``--canary`` (it would be ignored), or one the canary cannot
    honour: refused before anything is installed or switched."""
    if args.canary is None:
        stray = [
            arg.option(name)
            for name, arg in args_of(requests.CanaryRequest)
            if name not in ("build", "models") and getattr(args, name) is not None
        ]
        return f"{stray[0]} only applies with --canary" if stray else None
    if args.dry_run:
        return "--canary measures real starts; it has no --dry-run"
    if not args.generate:  # the canary regenerates: verify runs the models as the file says
        return "--no-generate does not apply with --canary: it measures the generated config"
    if args.force:
        return "--force does not apply with --canary: a promotion keeps no flag the build lacks"
    try:  # the canary's own limits, before anything is installed (update's build: not yet)
        made(
            args,
            requests.CanaryRequest,
            build=getattr(args, "build", None) or "-",
            models=args.canary,
        )
    except InvalidInput as exc:
        return str(exc)
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


async def run_canary(mgr: Manager, args: argparse.Namespace, out: Renderer, build: str) -> int:
    """Canary ``build`` (``activate``'s operand, or the build ``update`` installed)."""
    from ...api_models import dump

    request = made(args, requests.CanaryRequest, build=build, models=args.canary)

    def shown(model: str, build: str, n: int, run: Any) -> None:
        from ...measure.bench import run_line

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
