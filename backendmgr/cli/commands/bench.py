"""``bench MODEL… [--build B]… [--repeat N]``: prompt and generation speed per build (issue 32)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from ...limits import BENCH_PROMPT, BENCH_REPEAT, BENCH_TOKENS, VERIFY_TIMEOUT_S

if TYPE_CHECKING:
    from ...manager import Manager
    from ..render import Renderer

__all__ = ["add_run_options", "bench", "register"]


RUN_OPTIONS = (("--repeat", "repeat"), ("--prompt", "prompt"), ("--tokens", "tokens"))


def add_run_options(parser: argparse.ArgumentParser, *, defaults: bool = True) -> None:
    """How each (model, build) is measured: ``bench``'s and the canary's options. ``defaults``
    False: an option not given stays None (the canary's, refused without ``--canary``)."""

    def default(value: int) -> int | None:
        return value if defaults else None

    parser.add_argument(
        "--repeat",
        type=BENCH_REPEAT.argument(),
        default=default(3),
        metavar="N",
        help="runs per model and build; the median and spread are over them (3)",
    )
    parser.add_argument(
        "--prompt",
        type=BENCH_PROMPT.argument(),
        default=default(256),
        metavar="WORDS",
        help="words of the fixed prompt, about a token each (256)",
    )
    parser.add_argument(
        "--tokens",
        type=BENCH_TOKENS.argument(),
        default=default(64),
        metavar="N",
        help="tokens generated per run (64)",
    )
    parser.add_argument(
        "--timeout",
        type=VERIFY_TIMEOUT_S.argument(),
        metavar="S",
        help="seconds to become healthy, per start",
    )


def register(sub: argparse._SubParsersAction[Any]) -> None:
    b = sub.add_parser("bench", help="prompt and generation speed of models per build, measured")
    b.add_argument("models", nargs="+", metavar="MODEL", help="model ids")
    b.add_argument(
        "--build",
        action="append",
        metavar="B",
        help="a build id or a release tag of the activated variant (repeatable; "
        "default: the build each model resolves to)",
    )
    add_run_options(b)
    b.set_defaults(handler=bench)


async def bench(mgr: Manager, args: argparse.Namespace, out: Renderer) -> int:
    from ..._commit import hold_to_exit
    from ...api_models import dump

    hold_to_exit()  # a Ctrl-C once the figures are being written cannot say "cancelled"

    def shown(model: str, build: str, n: int, run: Any) -> None:
        pp = f"{run.prompt_per_second:.1f}" if run.prompt_per_second is not None else "?"
        out.waiting(
            f"{model} on {build}: run {n}/{args.repeat}: prompt {pp} t/s, "
            f"generation {run.predicted_per_second:.1f} t/s"
        )

    report = await mgr.bench.bench(
        args.models,
        args.build,
        repeat=int(args.repeat),
        prompt_words=int(args.prompt),
        tokens=int(args.tokens),
        timeout=args.timeout,
        on_run=shown,
    )
    for warning in report.warnings:
        out.warning(warning)
    if out.json_mode:
        out.document([dump(r) for r in report.results])
    else:
        for result in report.results:
            out.info(result.message)
    if report.failed and not out.json_mode:
        out.error(f"{report.failed} of {len(report.results)} could not be benched")
    return 1 if report.failed else 0
