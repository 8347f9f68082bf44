"""``set MODEL KEY=VALUE…`` and ``unset MODEL KEY…``."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from .common import add_no_generate, report

if TYPE_CHECKING:
    from ...manager import Manager
    from ..render import Renderer


def register(sub: argparse._SubParsersAction[Any]) -> None:
    p = sub.add_parser("set", help="set per-model overrides (ctx, vllm_gpu_util, extra_args, …)")
    p.add_argument("model")
    p.add_argument("pairs", nargs="+", metavar="KEY=VALUE")
    add_no_generate(p)
    p.set_defaults(handler=set_overrides)
    u = sub.add_parser("unset", help="clear per-model overrides")
    u.add_argument("model")
    u.add_argument("keys", nargs="+", metavar="KEY")
    add_no_generate(u)
    u.set_defaults(handler=unset_overrides)


def _pairs(items: list[str]) -> dict[str, str]:
    from ...errors import InvalidInput

    values: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise InvalidInput(f'"{item}" is not KEY=VALUE')
        values[key.strip()] = value
    return values


async def set_overrides(mgr: Manager, args: argparse.Namespace, out: Renderer) -> int:
    outcome = await mgr.set_overrides(args.model, _pairs(args.pairs), generate=not args.no_generate)
    return report(out, outcome)


async def unset_overrides(mgr: Manager, args: argparse.Namespace, out: Renderer) -> int:
    return report(
        out, await mgr.unset_overrides(args.model, args.keys, generate=not args.no_generate)
    )
