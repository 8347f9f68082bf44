"""``verify [MODEL…]``: start each emitted command once and report whether it serves."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from ...limits import VERIFY_TIMEOUT_S
from .tune import add_repair_options, repair

if TYPE_CHECKING:
    from ...manager import Manager
    from ..render import Renderer


def register(sub: argparse._SubParsersAction[Any]) -> None:
    v = sub.add_parser("verify", help="start each model's command once, send one request, stop it")
    v.add_argument("models", nargs="*", metavar="MODEL", help="model ids (default: all)")
    v.add_argument(
        "--timeout",
        type=VERIFY_TIMEOUT_S.argument(),
        metavar="S",
        help="seconds to become healthy, at most "
        f"{VERIFY_TIMEOUT_S.high:g} (default: health_check_timeout)",
    )
    v.add_argument("--keep-going", action="store_true", help="check the others after a failure")
    add_repair_options(v)  # issue 22
    v.set_defaults(handler=verify)


async def verify(mgr: Manager, args: argparse.Namespace, out: Renderer) -> int:
    if args.repair or args.dry_run:  # issue 22: pin failing models to a build that serves them
        return await repair(mgr, args, out)
    from ...requests import VerifyRequest

    request = VerifyRequest.of(models=args.models, timeout=args.timeout, keep_going=args.keep_going)
    results = await mgr.verify(request, on_result=lambda r: out.info(r.line()))
    from ...api_models import VerifyReport, dump

    failed = [r for r in results if not r.ok]
    if out.json_mode:
        out.document(dump(VerifyReport(results=results, failed=len(failed))))
    elif not results:
        out.info("no models to verify")
    if failed and not out.json_mode:
        names = ", ".join(r.id for r in failed)
        out.error(f"{len(failed)} of {len(results)} models failed verification: {names}")
    return 1 if failed else 0
