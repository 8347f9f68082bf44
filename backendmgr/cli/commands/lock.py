"""``lock``, ``sync`` and ``fetch``: the same builds on every machine (see README "Many
machines")."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from ...requests import FetchRequest, LockRequest, SyncRequest
from ..options import add_request, request_in
from .common import command, report

if TYPE_CHECKING:
    from ...manager import Manager
    from ..render import Renderer


def register(sub: argparse._SubParsersAction[Any]) -> None:
    lk = command(
        sub,
        "lock",
        lock,
        help="write backendmgr.lock: the exact builds installed here and the activated ones",
    )
    add_request(lk, LockRequest)
    s = command(sub, "sync", sync, help="install, verify and activate exactly the builds of a lock")
    add_request(s, SyncRequest)
    f = command(
        sub,
        "fetch",
        fetch,
        help="download every asset of a lock into DIR, laid out for scripts/mirror.py",
    )
    add_request(f, FetchRequest)


async def lock(mgr: Manager, args: argparse.Namespace, out: Renderer) -> int:
    return report(out, await mgr.lock(request_in(args, LockRequest)))


async def sync(mgr: Manager, args: argparse.Namespace, out: Renderer) -> int:
    from ..render import ProgressView

    with ProgressView(out) as view:
        outcome = await mgr.sync(request_in(args, SyncRequest), on_event=view)
    return report(out, outcome)


async def fetch(mgr: Manager, args: argparse.Namespace, out: Renderer) -> int:
    return report(out, await mgr.fetch(request_in(args, FetchRequest)))
