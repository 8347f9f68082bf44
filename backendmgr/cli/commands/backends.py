"""``backends``, ``backends add``, ``backends remove`` and ``default``."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from .common import add_no_generate, command, report, request_of

if TYPE_CHECKING:
    from ...manager import Manager
    from ..render import Renderer


def register(sub: argparse._SubParsersAction[Any]) -> None:
    p = command(
        sub, "backends", list_backends, help="the registry in order; add or remove manual rows"
    )
    actions = p.add_subparsers(dest="backends_action", metavar="ACTION", parser_class=type(p))
    add = command(actions, "add", add_backend, help="append a manual row")
    add.add_argument("id", help="a new row id (no '@', not a catalog component id)")
    add.add_argument(
        "--kind",
        required=True,
        type=_kind,
        help="llama, vllm, sd, tts, asr, audiocpp, …, or custom",
    )
    add.add_argument("--path", required=True, help="the executable")
    add.add_argument("--name", default="", help="a display name")
    add.add_argument(
        "--force", action="store_true", help="accept a path that is missing or not executable"
    )
    add.add_argument("--default", action="store_true", help="make it the ★ of its classes")
    add_no_generate(add)
    remove = command(actions, "remove", remove_backend, help="remove a manual row")
    remove.add_argument("id", help="a manual row id from 'backendmgr backends'")
    add_no_generate(remove)

    d = command(sub, "default", set_default, help="make ROW the ★ of every class its kind serves")
    d.add_argument("row", help="a row id from 'backendmgr backends'")
    add_no_generate(d)


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


async def list_backends(mgr: Manager, args: argparse.Namespace, out: Renderer) -> int:
    from ...api_models import dump

    if out.json_mode:
        out.document(dump(await mgr.backends_info()))
        return 0
    rows = await mgr.backends_info(probe=False)  # the table probes nothing
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
    from ...requests import AddBackendRequest

    request = request_of(AddBackendRequest, args)
    return report(out, await mgr.add_backend(request))


async def remove_backend(mgr: Manager, args: argparse.Namespace, out: Renderer) -> int:
    return report(out, await mgr.remove_backend(args.id, generate=not args.no_generate))


async def set_default(mgr: Manager, args: argparse.Namespace, out: Renderer) -> int:
    return report(out, await mgr.set_default(args.row, generate=not args.no_generate))
