"""``bisect MODEL --good TAG --bad TAG``: the first bad release, as a Markdown report (issue 32)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from ...run_requests import BisectRequest
from ..options import add_request, request_in

if TYPE_CHECKING:
    from ...manager import Manager
    from ..render import Renderer

__all__ = ["bisect", "register"]


def register(sub: argparse._SubParsersAction[Any]) -> None:
    b = sub.add_parser(
        "bisect", help="find the first release that made a model slower or stop starting"
    )
    add_request(b, BisectRequest)
    b.set_defaults(handler=bisect)


async def bisect(mgr: Manager, args: argparse.Namespace, out: Renderer) -> int:
    from ...api_models import dump

    request = request_in(args, BisectRequest)

    def step(tag: str, r: Any) -> None:
        said = f"{r.predicted_per_second:g} t/s" if r.ok else f"failed: {r.reason}"
        out.waiting(f"{request.model} on {tag}: {said}")

    report = await mgr.bisect(request, on_step=step)
    if out.json_mode:
        out.document(dump(report))
    else:
        out.info(report.report.rstrip("\n"))
    return 0
