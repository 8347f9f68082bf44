"""``backends``, ``backends add``, ``backends remove`` and ``default``."""

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


def _backends(sub: argparse._SubParsersAction[Any]) -> None:
    p = command(
        sub, "backends", list_backends, help="the registry in order; add or remove manual rows"
    )
    actions = p.add_subparsers(dest="backends_action", metavar="ACTION", parser_class=type(p))
    add = command(actions, "add", add_backend, help="append a manual row")
    add_request(add, requests.AddBackendRequest, types={"kind": _kind})
    remove = command(actions, "remove", remove_backend, help="remove a manual row")
    add_request(remove, requests.RemoveBackendRequest)


def _default(sub: argparse._SubParsersAction[Any]) -> None:
    d = command(sub, "default", set_default, help="make ROW the ★ of every class its kind serves")
    add_request(d, requests.DefaultRequest)


PARSERS: dict[str, Callable[[argparse._SubParsersAction[Any]], None]] = {
    "backends": _backends,
    "default": _default,
}
"""Each command's parser on its own: a run makes only its own command's requests."""


def _kind(text: str) -> str:
    """``--kind``: a known kind, else a usage error with the nearest ones (the registry checks
    again for the API)."""
    from ...errors import InvalidInput, escaped, unknown
    from ...registry.kinds import KNOWN_KINDS, normalize_kind

    if normalize_kind(text) in KNOWN_KINDS:
        return text
    hint = f"known kinds: {', '.join(KNOWN_KINDS)}"
    error = unknown(
        f'unknown kind "{escaped(text)}"',
        normalize_kind(text),
        KNOWN_KINDS,
        hint=hint,
        always_hint=True,
        error=InvalidInput,
    )
    raise argparse.ArgumentTypeError(str(error))


def list_backends(mgr: Manager, args: argparse.Namespace, out: Renderer) -> int:
    from ...api_models import dump

    if out.json_mode:
        out.document(dump(mgr.backends_info()))
        return 0
    rows = mgr.backends_info(probe=False)  # the table probes nothing
    out.table(
        ["", "id", "kind", "classes", "managed", "path"],
        [
            [
                "★" if r.default else "",
                r.id,
                r.kind,
                ",".join(r.classes) or "-",
                "build" if r.build else ("yes" if r.managed else ""),
                r.path,
            ]
            for r in rows
        ],
        empty='the registry is empty; see "backendmgr install" and "backendmgr backends add"',
    )
    return 0


async def add_backend(mgr: Manager, args: argparse.Namespace, out: Renderer) -> int:
    return report(out, await mgr.add_backend(request_in(args, requests.AddBackendRequest)))


async def remove_backend(mgr: Manager, args: argparse.Namespace, out: Renderer) -> int:
    return report(out, await mgr.remove_backend(request_in(args, requests.RemoveBackendRequest)))


async def set_default(mgr: Manager, args: argparse.Namespace, out: Renderer) -> int:
    return report(out, await mgr.set_default(request_in(args, requests.DefaultRequest)))
