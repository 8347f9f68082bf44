"""``lock``, ``sync`` and ``fetch``: the same builds on every machine (see README "Many
machines")."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from .common import command, report, request_of

if TYPE_CHECKING:
    from ...manager import Manager
    from ..render import Renderer


def _path(text: str) -> str:
    """A PATH operand or option value: an empty one is a usage error, never "here"."""
    if not text.strip():
        raise argparse.ArgumentTypeError("a path cannot be empty")
    return text


def register(sub: argparse._SubParsersAction[Any]) -> None:
    lk = command(
        sub,
        "lock",
        lock,
        help="write backendmgr.lock: the exact builds installed here and the activated ones",
    )
    lk.add_argument(
        "--output",
        metavar="PATH",
        type=_path,
        help="where to write it (default: beside the config file)",
    )
    lk.add_argument(
        "--fetch",
        metavar="DIR",
        type=_path,
        help="also download every locked asset into DIR, laid out for scripts/mirror.py",
    )

    s = command(sub, "sync", sync, help="install, verify and activate exactly the builds of a lock")
    s.add_argument(
        "lockfile", nargs="?", metavar="LOCK", type=_path, help="default: beside the config file"
    )
    s.add_argument(
        "--locked",
        action="store_true",
        help="fail, changing nothing, if the lock is out of date for the builds installed here",
    )
    s.add_argument("--prune", action="store_true", help="remove builds the lock does not list")
    s.add_argument("--force", action="store_true", help="with --prune: remove pinned builds too")
    s.add_argument("--dry-run", action="store_true", help="say what would change, change nothing")

    f = command(
        sub,
        "fetch",
        fetch,
        help="download every asset of a lock into DIR, laid out for scripts/mirror.py",
    )
    f.add_argument(
        "dir", metavar="DIR", type=_path, help="where to lay out <owner>/<repo>/<tag>/<asset>"
    )
    f.add_argument(
        "lockfile", nargs="?", metavar="LOCK", type=_path, help="default: beside the config file"
    )


async def lock(mgr: Manager, args: argparse.Namespace, out: Renderer) -> int:
    return report(out, await mgr.lock(args.output, fetch=args.fetch))


async def sync(mgr: Manager, args: argparse.Namespace, out: Renderer) -> int:
    from ...requests import SyncRequest
    from ..render import ProgressView

    if args.force and not args.prune:
        from ...errors import InvalidInput

        raise InvalidInput("--force only applies with --prune")
    with ProgressView(out) as view:
        request = request_of(SyncRequest, args, lock=args.lockfile)
        outcome = await mgr.sync(request, on_event=view)
    return report(out, outcome)


async def fetch(mgr: Manager, args: argparse.Namespace, out: Renderer) -> int:
    return report(out, await mgr.fetch(args.dir, args.lockfile))
