"""``set MODEL KEY=VALUE…`` and ``unset MODEL KEY…``."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ... import requests
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


def _set(sub: argparse._SubParsersAction[Any]) -> None:
    p = _keyed(
        sub, "set", set_overrides, "set per-model overrides (ctx, vllm_gpu_util, extra_args, …)"
    )
    add_request(p, requests.SetRequest)


def _unset(sub: argparse._SubParsersAction[Any]) -> None:
    u = _keyed(sub, "unset", unset_overrides, "clear per-model overrides")
    add_request(u, requests.UnsetRequest)


PARSERS: dict[str, Callable[[argparse._SubParsersAction[Any]], None]] = {
    "set": _set,
    "unset": _unset,
}
"""Each command's parser on its own: a run makes only its own command's request."""


async def set_overrides(mgr: Manager, args: argparse.Namespace, out: Renderer) -> int:
    return report(out, await mgr.set_overrides(request_in(args, requests.SetRequest)))


async def unset_overrides(mgr: Manager, args: argparse.Namespace, out: Renderer) -> int:
    return report(out, await mgr.unset_overrides(request_in(args, requests.UnsetRequest)))
