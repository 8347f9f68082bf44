"""``tune MODEL…`` and ``verify --repair``: measured contexts and pins chosen by evidence."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from ...limits import (
    TUNE_ATTEMPTS,
    TUNE_BUDGET_GB,
    TUNE_DEADLINE_DEFAULT_S,
    TUNE_DEADLINE_S,
    VERIFY_TIMEOUT_S,
)
from .common import add_no_generate

if TYPE_CHECKING:
    from ...manager import Manager
    from ..render import Renderer

__all__ = ["add_repair_options", "register", "repair", "tune"]


def add_repair_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--repair",
        action="store_true",
        help="pin each failing model to the newest other installed build that serves it",
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="with --repair: report, change nothing"
    )


def register(sub: argparse._SubParsersAction[Any]) -> None:
    t = sub.add_parser(
        "tune", help="find the largest context that starts and fits the memory budget"
    )
    t.add_argument("models", nargs="+", metavar="MODEL", help="model ids")
    t.add_argument(
        "--budget",
        type=TUNE_BUDGET_GB.argument(),
        metavar="GiB",
        help="memory budget (default: the model's or card)",
    )
    t.add_argument(
        "--max-attempts",
        type=TUNE_ATTEMPTS.argument(),
        default=8,
        metavar="N",
        help=f"starts per model (8, at most {TUNE_ATTEMPTS.high:g})",
    )
    t.add_argument(
        "--timeout",
        type=VERIFY_TIMEOUT_S.argument(),
        metavar="S",
        help="seconds to become healthy, per start",
    )
    t.add_argument(
        "--deadline",
        type=TUNE_DEADLINE_S.argument(),
        default=TUNE_DEADLINE_DEFAULT_S,
        metavar="S",
        help=f"seconds for the whole run, every start included ({TUNE_DEADLINE_DEFAULT_S:g}); "
        "the search stops there with the largest context found so far",
    )
    add_no_generate(t)
    t.set_defaults(handler=tune)


async def tune(mgr: Manager, args: argparse.Namespace, out: Renderer) -> int:
    from ..._commit import hold_to_exit
    from ...api_models import dump

    hold_to_exit()  # issue 29: a Ctrl-C once the record is being written cannot say "cancelled"

    def trial(model_id: str, t: Any) -> None:
        what = f"{t.gib:.3f} GiB" if t.gib is not None else (t.cause or t.reason or "failed")
        out.info(f"{model_id}: ctx {t.ctx}: {'fits' if t.ok else 'no'} ({what})")

    report = await mgr.tune(
        args.models,
        budget_gb=args.budget,
        max_attempts=args.max_attempts,
        timeout=args.timeout,
        deadline=args.deadline,
        generate=not args.no_generate,
        on_trial=None if out.json_mode else trial,
    )
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
        args.models,
        dry_run=args.dry_run,
        timeout=args.timeout,
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
