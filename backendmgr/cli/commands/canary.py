"""``activate BUILD --canary MODEL…``: the canary's options and its report (issue 32)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from ...limits import CANARY_TOLERANCE
from .bench import add_run_options

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
        default=5.0,
        metavar="PCT",
        help="with --canary: how much slower (percent) the new build may be (5)",
    )
    add_run_options(parser)


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

    if args.dry_run:
        return out.failure("--canary measures real starts; it has no --dry-run", 2)

    def shown(model: str, build: str, n: int, run: Any) -> None:
        out.waiting(run_line(model, build, n, int(args.repeat), run))

    request = CanaryRequest(
        build=args.build,
        models=list(args.canary),
        tolerance=args.tolerance,
        repeat=int(args.repeat),
        prompt_words=int(args.prompt),
        tokens=int(args.tokens),
        timeout=args.timeout,
    )
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
