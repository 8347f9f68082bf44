"""``pin MODEL ROW`` and ``unpin MODEL``."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from ...requests import PinRequest, UnpinRequest
from ..options import add_request, request_in
from .common import command, report

if TYPE_CHECKING:
    from ...manager import Manager
    from ..render import Renderer


def register(sub: argparse._SubParsersAction[Any]) -> None:
    p = command(sub, "pin", pin, help="keep MODEL on one registry row (e.g. a build)")
    add_request(p, PinRequest)
    u = command(sub, "unpin", unpin, help="let MODEL follow the class default again")
    add_request(u, UnpinRequest)


async def pin(mgr: Manager, args: argparse.Namespace, out: Renderer) -> int:
    return report(out, await mgr.pin(request_in(args, PinRequest)))


async def unpin(mgr: Manager, args: argparse.Namespace, out: Renderer) -> int:
    return report(out, await mgr.unpin(request_in(args, UnpinRequest)))
