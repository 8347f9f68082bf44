"""``models``, ``cmd MODEL`` and ``generate``."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ... import requests
from ..options import add_request, request_in
from .common import report

if TYPE_CHECKING:
    from ...api_models import ModelInfo
    from ...manager import Manager
    from ..render import Renderer


def _models(sub: argparse._SubParsersAction[Any]) -> None:
    m = sub.add_parser("models", help="discovered models, the row each resolves to, and why")
    m.set_defaults(handler=models)
    folders = m.add_subparsers(dest="models_action", metavar="ACTION", required=False)
    for name, add, text in (
        ("add-dir", True, "add a folder that holds models to models_dirs"),
        ("remove-dir", False, "remove a folder from models_dirs"),
    ):
        f = folders.add_parser(name, help=text, description=text)
        add_request(f, requests.ModelsDirRequest, given={"add": add})
        f.set_defaults(handler=models_dir)


def _cmd(sub: argparse._SubParsersAction[Any]) -> None:
    c = sub.add_parser("cmd", help="print the command line a model gets")
    add_request(c, requests.CmdRequest)
    c.set_defaults(handler=cmd)


def _generate(sub: argparse._SubParsersAction[Any]) -> None:
    g = sub.add_parser("generate", help="regenerate the llama-swap config")
    add_request(g, requests.GenerateRequest)
    g.set_defaults(handler=generate)


PARSERS: dict[str, Callable[[argparse._SubParsersAction[Any]], None]] = {
    "models": _models,
    "cmd": _cmd,
    "generate": _generate,
}
"""Each command's parser on its own: a run makes only its own command's requests."""


async def models_dir(mgr: Manager, args: argparse.Namespace, out: Renderer) -> int:
    return report(out, await mgr.models_dir(request_in(args, requests.ModelsDirRequest)))


def models(mgr: Manager, args: argparse.Namespace, out: Renderer) -> int:
    from ...api_models import dump

    rows, problems = mgr.models_report()
    for problem in problems:
        out.warning(problem)
    if out.json_mode:
        out.document(dump(rows))
        return 0
    out.table(
        ["model", "format", "class", "role", "GiB", "backend", "why"],
        [
            [
                r.id,
                r.format,
                r.class_ or "-",
                r.role or "-",
                "" if r.size_gb is None else f"{r.size_gb:.2f}",
                *_backend_cells(r),
            ]
            for r in rows
        ],
        empty="no models found" + ("" if problems else " in models_dirs"),
    )
    return 0


def _backend_cells(row: ModelInfo) -> list[str]:
    if row.skipped:
        return ["-", f"skipped: {row.skipped}"]
    backend = row.backend
    return [
        (backend.id or backend.path or "-") if backend else "-",
        "; ".join(
            [
                backend.reason if backend else "",
                *row.notes,
                *_checked(row),
                *_tuned(row),
                *_benched(row),
            ]
        ),
    ]


def _tuned(row: ModelInfo) -> list[str]:
    """Issue 22/33: ``ctx 16384 from tuning: …``, ``ctx 2048 from the trained context …``."""
    return [row.tuning] if row.tuning and row.tuning not in row.notes else []  # said once


def _benched(row: ModelInfo) -> list[str]:
    """Issue 32: ``bench llama-server@b1-cpu: prompt 812 t/s, generation 41.2 t/s`` per build."""
    out = []
    for f in row.bench or []:
        pp = f["prompt_per_second"]
        pp_text = "?" if pp is None else f"{pp:g}"
        out.append(
            f"bench {f['build']}: prompt {pp_text} t/s, "
            f"generation {f['predicted_per_second']:g} t/s"
        )
    return out


def _checked(row: ModelInfo) -> list[str]:
    """``verified today: ok in 1.0 s, 6.31 GiB (est 6.42 GiB)`` or ``not verified``."""
    text = row.verification
    if not text:
        return []
    measured = row.verified.gpu_gib if row.verified else None
    if measured is not None and row.est_vram_gb is not None:
        text += f" (est {row.est_vram_gb:.2f} GiB)"
    return [text]


def cmd(mgr: Manager, args: argparse.Namespace, out: Renderer) -> int:
    from ...api_models import dump

    result = mgr.cmd(request_in(args, requests.CmdRequest))
    if out.json_mode:
        out.document(dump(result))
    else:
        out.stdout.write(result.shell_line() + "\n")
    return 0


async def generate(mgr: Manager, args: argparse.Namespace, out: Renderer) -> int:
    return report(out, await mgr.generate(request_in(args, requests.GenerateRequest)))
