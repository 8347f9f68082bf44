"""``set MODEL KEY=VALUE…`` and ``unset MODEL KEY…``."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from ...requests import SetRequest, UnsetRequest
from ..keys import KEY_HELP
from ..options import add_request, request_in
from .common import command, report

if TYPE_CHECKING:
    from ...manager import Manager
    from ..render import Renderer
    from .common import Handler


def _keys_epilog() -> str:
    width = max(len(k) for k in KEY_HELP)
    lines = [f"  {key:<{width}}  {text}" for key, text in KEY_HELP.items()]
    return "keys:\n" + "\n".join(lines) + '\n\nthe backend is set with "backendmgr pin".'


def _keyed(
    sub: argparse._SubParsersAction[Any], name: str, handler: Handler, help: str
) -> argparse.ArgumentParser:
    """``set`` and ``unset``: a command that lists the keys under its options."""
    epilog = _keys_epilog()
    from ..parser import RawDescriptionHelpFormatter as formatter

    return command(sub, name, handler, help=help, epilog=epilog, formatter_class=formatter)


def register(sub: argparse._SubParsersAction[Any]) -> None:
    p = _keyed(
        sub, "set", set_overrides, "set per-model overrides (ctx, vllm_gpu_util, extra_args, …)"
    )
    add_request(p, SetRequest)
    u = _keyed(sub, "unset", unset_overrides, "clear per-model overrides")
    add_request(u, UnsetRequest)


async def set_overrides(mgr: Manager, args: argparse.Namespace, out: Renderer) -> int:
    return report(out, await mgr.set_overrides(request_in(args, SetRequest)))


async def unset_overrides(mgr: Manager, args: argparse.Namespace, out: Renderer) -> int:
    return report(out, await mgr.unset_overrides(request_in(args, UnsetRequest)))
