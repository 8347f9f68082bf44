"""``pin MODEL ROW`` and ``unpin MODEL``."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ... import requests
from ..options import add_request, request_in
from .common import command, report

if TYPE_CHECKING:
    from ...manager import Manager
    from ..render import Renderer


def _pin(sub: argparse._SubParsersAction[Any]) -> None:
    p = command(sub, "pin", pin, help="keep MODEL on one registry row (e.g. a build)")
    add_request(p, requests.PinRequest)


def _unpin(sub: argparse._SubParsersAction[Any]) -> None:
    u = command(sub, "unpin", unpin, help="let MODEL follow the class default again")
    add_request(u, requests.UnpinRequest)


PARSERS: dict[str, Callable[[argparse._SubParsersAction[Any]], None]] = {
    "pin": _pin,
    "unpin": _unpin,
}
"""Each command's parser on its own: a run makes only its own command's request."""


async def pin(mgr: Manager, args: argparse.Namespace, out: Renderer) -> int:
    return report(out, await mgr.pin(request_in(args, requests.PinRequest)))


async def unpin(mgr: Manager, args: argparse.Namespace, out: Renderer) -> int:
    return report(out, await mgr.unpin(request_in(args, requests.UnpinRequest)))
