"""``bisect MODEL --good TAG --bad TAG``: the first bad release, as a Markdown report (issue 32)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from .bench import add_run_options

if TYPE_CHECKING:
    from ...manager import Manager
    from ..render import Renderer

__all__ = ["bisect", "register"]


def register(sub: argparse._SubParsersAction[Any]) -> None:
    b = sub.add_parser(
        "bisect", help="find the first release that made a model slower or stop starting"
    )
    b.add_argument("model", metavar="MODEL", help="model id")
    b.add_argument("--good", required=True, metavar="TAG", help="a release that was good")
    b.add_argument("--bad", required=True, metavar="TAG", help="a later release that is bad")
    b.add_argument(
        "--metric",
        choices=("speed", "starts"),
        default="speed",
        help="what makes a release bad: slower generation (speed) or not starting (starts)",
    )
    b.add_argument(
        "--threshold",
        type=float,
        default=10.0,
        metavar="PCT",
        help="with --metric speed: slower than the good release by more than this (10)",
    )
    b.add_argument("--keep", action="store_true", help="keep the builds installed for the search")
    add_run_options(b)
    b.set_defaults(handler=bisect)


async def bisect(mgr: Manager, args: argparse.Namespace, out: Renderer) -> int:
    from ...api_models import dump

    def step(tag: str, r: Any) -> None:
        said = f"{r.predicted_per_second:g} t/s" if r.ok else f"failed: {r.reason}"
        out.waiting(f"{args.model} on {tag}: {said}")

    report = await mgr.bisect(
        args.model,
        args.good,
        args.bad,
        metric=args.metric,
        threshold=args.threshold,
        keep=args.keep,
        repeat=int(args.repeat),
        prompt_words=int(args.prompt),
        tokens=int(args.tokens),
        timeout=args.timeout,
        on_step=step,
    )
    if out.json_mode:
        out.document(dump(report))
    else:
        out.info(report.report.rstrip("\n"))
    return 0
