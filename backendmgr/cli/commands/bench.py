"""``bench MODEL… [--build B]… [--repeat N]``: prompt and generation speed per build (issue 32)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from ...run_requests import BenchRequest
from ..options import add_request, request_in

if TYPE_CHECKING:
    from ...manager import Manager
    from ..render import Renderer

__all__ = ["bench", "register"]


def register(sub: argparse._SubParsersAction[Any]) -> None:
    b = sub.add_parser("bench", help="prompt and generation speed of models per build, measured")
    add_request(b, BenchRequest)
    b.set_defaults(handler=bench)


async def bench(mgr: Manager, args: argparse.Namespace, out: Renderer) -> int:
    from ..._commit import hold_to_exit
    from ...api_models import dump

    hold_to_exit()  # a Ctrl-C once the figures are being written cannot say "cancelled"
    request = request_in(args, BenchRequest)

    def shown(model: str, build: str, n: int, run: Any) -> None:
        pp = f"{run.prompt_per_second:.1f}" if run.prompt_per_second is not None else "?"
        out.waiting(
            f"{model} on {build}: run {n}/{request.repeat}: prompt {pp} t/s, "
            f"generation {run.predicted_per_second:.1f} t/s"
        )

    report = await mgr.bench(request, on_run=shown)
    for warning in report.warnings:
        out.warning(warning)
    if out.json_mode:
        out.document(dump(report)["results"])
    else:
        for result in report.results:
            out.info(result.message)
    if report.failed and not out.json_mode:
        out.error(f"{report.failed} of {len(report.results)} could not be benched")
    return 1 if report.failed else 0
