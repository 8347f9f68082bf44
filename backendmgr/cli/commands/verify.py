"""``verify [MODEL…]``: start each emitted command once and report whether it serves."""

from __future__ import annotations

import argparse
import shlex
from typing import TYPE_CHECKING, Any

from ...requests import VerifyRequest
from ..options import add_request, request_in
from .tune import add_repair_options, repair

if TYPE_CHECKING:
    from ...api_models import VerifyReport
    from ...manager import Manager
    from ..render import Renderer


def register(sub: argparse._SubParsersAction[Any]) -> None:
    v = sub.add_parser("verify", help="start each model's command once, send one request, stop it")
    add_request(v, VerifyRequest)
    add_repair_options(v)  # issue 22
    v.set_defaults(handler=verify)


async def verify(mgr: Manager, args: argparse.Namespace, out: Renderer) -> int:
    if args.repair or args.dry_run:  # issue 22: pin failing models to a build that serves them
        return await repair(mgr, args, out)
    request = request_in(args, VerifyRequest)
    report = await mgr.verify(request, on_result=lambda r: out.info(r.line()))
    if out.json_mode:
        from ...api_models import dump

        out.document(dump(report))
    elif not report.results:
        out.info("no models to verify")
    if report.failed and not out.json_mode:
        out.error(failed_line(report))
    return 1 if report.failed else 0


def failed_line(report: VerifyReport) -> str:
    """The summary of a failed run; one that stopped at its first failure counts and names the
    models it did not reach, and how to check them (issue 20)."""
    names = ", ".join(r.id for r in report.results if not r.ok)
    total = len(report.results) + len(report.unchecked)
    line = f"{report.failed} of {total} models failed verification: {names}"
    if not report.unchecked:
        return line
    again = shlex.join(["backendmgr", "verify", *report.unchecked])
    return (
        f"{line}; {len(report.unchecked)} not checked after the first failure: "
        f"{', '.join(report.unchecked)} (check them with --keep-going, or name them: {again})"
    )
