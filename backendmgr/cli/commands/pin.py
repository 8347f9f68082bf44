"""``pin MODEL ROW`` and ``unpin MODEL``."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from .common import add_dry_run, add_no_generate, command, report

if TYPE_CHECKING:
    from ...manager import Manager
    from ..render import Renderer


def register(sub: argparse._SubParsersAction[Any]) -> None:
    p = command(sub, "pin", pin, help="keep MODEL on one registry row (e.g. a build)")
    p.add_argument("model", help="a model id from 'backendmgr models'")
    p.add_argument("row", help="a row id from 'backendmgr backends', e.g. llama-server@b10800-rocm")
    add_no_generate(p)
    add_dry_run(p)
    p.add_argument(
        "--force",
        action="store_true",
        help="pin even when the model's extra_args uses a flag the build does not list",
    )
    u = command(sub, "unpin", unpin, help="let MODEL follow the class default again")
    u.add_argument("model", help="a model id")
    add_no_generate(u)
    add_dry_run(u)


async def pin(mgr: Manager, args: argparse.Namespace, out: Renderer) -> int:
    return report(
        out,
        await mgr.pin(
            args.model,
            args.row,
            generate=not args.no_generate,
            dry_run=args.dry_run,
            force=args.force,
        ),
    )


async def unpin(mgr: Manager, args: argparse.Namespace, out: Renderer) -> int:
    return report(
        out, await mgr.unpin(args.model, generate=not args.no_generate, dry_run=args.dry_run)
    )
