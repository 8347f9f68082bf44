"""``update``, ``prune``, ``cache clean``, ``which`` and ``config path|show``."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ... import requests
from ..options import add_request, request_in
from .common import command, report

if TYPE_CHECKING:
    from ...manager import Manager
    from ..render import Renderer


def _update(sub: argparse._SubParsersAction[Any]) -> None:
    u = command(
        sub,
        "update",
        update,
        help="install and activate the newest release of installed components",
    )
    add_request(u, requests.UpdateRequest)
    from .canary import add_canary_options

    add_canary_options(u)


def _prune(sub: argparse._SubParsersAction[Any]) -> None:
    p = command(sub, "prune", prune, help="remove builds neither activated nor pinned")
    add_request(p, requests.PruneRequest)


def _cache(sub: argparse._SubParsersAction[Any]) -> None:
    c = sub.add_parser("cache", help="the download and release-listing cache")
    csub = c.add_subparsers(dest="cache_command", metavar="ACTION", required=True)
    clean = command(
        csub,
        "clean",
        cache_clean,
        help="remove release listings, partial downloads and leftover folders",
    )
    add_request(clean, requests.CacheCleanRequest)


def _which(sub: argparse._SubParsersAction[Any]) -> None:
    w = command(sub, "which", which, help="the executable that would run, and why")
    add_request(w, requests.WhichRequest)


def _config(sub: argparse._SubParsersAction[Any]) -> None:
    g = sub.add_parser("config", help="where the files are; the effective settings")
    gsub = g.add_subparsers(dest="config_command", metavar="ACTION", required=True)
    command(gsub, "path", config_path, help="the config file, generated file and data home")
    command(gsub, "show", config_show, help="every setting, defaults filled in")


PARSERS: dict[str, Callable[[argparse._SubParsersAction[Any]], None]] = {
    "update": _update,
    "prune": _prune,
    "cache": _cache,
    "which": _which,
    "config": _config,
}
"""Each command's parser on its own, as in :mod:`.builds`: ``which`` makes its one request."""


async def update(mgr: Manager, args: argparse.Namespace, out: Renderer) -> int:
    from ..render import ProgressView

    if args.canary:  # issue 32: the newest build, installed, then the canary decides
        from .canary import run_canary

        if len(args.components) > 1:
            return out.failure("update --canary takes at most one COMPONENT", 2)
        component = args.components[0] if args.components else None
        newest = await mgr.canary_build(args.canary, component)
        if newest is None:
            out.info("the activated build is already the newest; nothing to try")
            return 0
        return await run_canary(mgr, args, out, newest)

    with ProgressView(out) as view:
        outcome = await mgr.update(request_in(args, requests.UpdateRequest), on_event=view)
    return report(out, outcome)


async def prune(mgr: Manager, args: argparse.Namespace, out: Renderer) -> int:
    return report(out, await mgr.prune(request_in(args, requests.PruneRequest)))


async def cache_clean(mgr: Manager, args: argparse.Namespace, out: Renderer) -> int:
    return report(out, await mgr.cache_clean(request_in(args, requests.CacheCleanRequest)))


def which(mgr: Manager, args: argparse.Namespace, out: Renderer) -> int:
    from ...api_models import dump

    found = mgr.which(request_in(args, requests.WhichRequest))
    if out.json_mode:
        out.document(dump(found))
        return 0
    out.info(found.path or "")
    row = f"row {found.row}" if found.row is not None else "no row"  # legacy server_exe
    out.info(f"  {found.type} → {row}: {found.reason}")
    for note in found.notes:
        out.info(f"  note: {note}")
    if not found.exists:
        out.warning(f"{found.path} does not exist or is not on PATH")
    return 0


def config_path(mgr: Manager, args: argparse.Namespace, out: Renderer) -> int:
    from ...api_models import dump

    info = mgr.config_info()
    if out.json_mode:
        out.document({k: v for k, v in dump(info).items() if k != "settings"})
        return 0
    missing = "" if info.config_exists else " (not created yet; defaults apply)"
    out.info(f"config:    {info.config}{missing}")
    out.info(f"generated: {info.output}")
    out.info(f"home:      {info.home}")
    return 0


def config_show(mgr: Manager, args: argparse.Namespace, out: Renderer) -> int:
    from ...api_models import dump

    info = mgr.config_info()
    document = dump(info)
    if out.json_mode:
        out.document(document)
        return 0
    import io

    from ruamel.yaml import YAML

    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = False
    buf = io.StringIO()
    yaml.dump(document["settings"], buf)
    out.info(f"# {info.config} (defaults filled in); generated file: {info.output}")
    out.info(buf.getvalue().rstrip("\n"))
    return 0
