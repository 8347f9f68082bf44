"""``tune MODEL…`` and ``verify --repair``: measured contexts and pins chosen by evidence."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from ...run_requests import RepairRequest, TuneRequest
from ..options import add_fields, add_request, made, request_in

if TYPE_CHECKING:
    from ...manager import Manager
    from ..render import Renderer

__all__ = ["add_repair_options", "register", "repair", "tune"]


def add_repair_options(parser: argparse.ArgumentParser) -> None:
    """``verify``'s ``--repair``, and the repair's own fields beyond verify's (``--dry-run``)."""
    parser.add_argument(
        "--repair",
        action="store_true",
        help="pin each failing model to the newest other installed build that serves it",
    )
    add_fields(parser, RepairRequest, skip=("models", "timeout"))


def register(sub: argparse._SubParsersAction[Any]) -> None:
    t = sub.add_parser(
        "tune", help="find the largest context that starts and fits the memory budget"
    )
    add_request(t, TuneRequest)
    t.set_defaults(handler=tune)


async def tune(mgr: Manager, args: argparse.Namespace, out: Renderer) -> int:
    from ..._commit import hold_to_exit
    from ...api_models import dump

    hold_to_exit()  # issue 29: a Ctrl-C once the record is being written cannot say "cancelled"

    def trial(model_id: str, t: Any) -> None:
        what = f"{t.gib:.3f} GiB" if t.gib is not None else (t.cause or t.reason or "failed")
        out.info(f"{model_id}: ctx {t.ctx}: {'fits' if t.ok else 'no'} ({what})")

    request = request_in(args, TuneRequest)
    report = await mgr.tune(request, on_trial=None if out.json_mode else trial)
    for warning in report.warnings:
        out.warning(warning)
    if out.json_mode:
        out.document(dump(report))
    else:
        for result in report.results:
            out.info(result.message)
    if report.failed and not out.json_mode:
        out.error(f"{report.failed} of {len(report.results)} models could not be tuned")
    return 1 if report.failed else 0


async def repair(mgr: Manager, args: argparse.Namespace, out: Renderer) -> int:
    from ...api_models import VerifyReport, dump

    if args.dry_run and not args.repair:
        args.repair = True  # --dry-run alone reads as "what would --repair do"
    results, report = await mgr.repair(
        made(args, RepairRequest),
        on_result=None if out.json_mode else (lambda r: out.info(r.line())),
        on_attempt=None if out.json_mode else (lambda m, a: out.info(f"{m}: tried {a.line()}")),
    )
    if out.json_mode:
        failed = sum(1 for r in results if not r.ok)
        verified = dump(VerifyReport(results=results, failed=failed))
        out.document({**verified, "repair": dump(report)})
    else:
        for result in report.results:
            out.info(result.message)
        out.info(report.message)
    if report.failed and not out.json_mode:
        names = ", ".join(r.id for r in report.results if not r.ok)
        out.error(f"{report.failed} models still fail: {names}")
    return 1 if report.failed else 0
