"""``catalog``, ``releases``, ``install``, ``uninstall``, ``activate``, ``list``, ``doctor``."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ... import requests
from ...units import format_size
from ..options import add_request, request_in
from .common import command, report, table

if TYPE_CHECKING:
    from ...manager import Manager
    from ..render import Renderer


def _catalog(sub: argparse._SubParsersAction[Any]) -> None:
    command(sub, "catalog", catalog, help="components, variants here, suggested variant and why")


def _releases(sub: argparse._SubParsersAction[Any]) -> None:
    r = command(sub, "releases", releases, help="recent versions and the variants each ships here")
    add_request(r, requests.ReleasesQuery)


def _install(sub: argparse._SubParsersAction[Any]) -> None:
    i = command(sub, "install", install, help="install a build (VERSION defaults to the latest)")
    add_request(i, requests.InstallRequest)


def _uninstall(sub: argparse._SubParsersAction[Any]) -> None:
    u = command(sub, "uninstall", uninstall, help="remove installed builds (all or none)")
    add_request(u, requests.UninstallRequest)


def _activate(sub: argparse._SubParsersAction[Any]) -> None:
    a = command(sub, "activate", activate, help="switch the activated build of a component")
    add_request(a, requests.ActivateRequest)
    from .canary import add_canary_options  # activate's and update's only: not list's

    add_canary_options(a)


def _list(sub: argparse._SubParsersAction[Any]) -> None:
    li = command(sub, "list", list_builds, help="installed builds")
    add_request(li, requests.ListRequest)


def _doctor(sub: argparse._SubParsersAction[Any]) -> None:
    d = command(sub, "doctor", doctor, help="registry vs disk, stale pins, leftovers")
    add_request(d, requests.DoctorRequest)


PARSERS: dict[str, Callable[[argparse._SubParsersAction[Any]], None]] = {
    "catalog": _catalog,
    "releases": _releases,
    "install": _install,
    "uninstall": _uninstall,
    "activate": _activate,
    "list": _list,
    "doctor": _doctor,
}
"""Each command's parser on its own (:func:`..commands.register` builds the one being run):
naming a request makes its class, and a run makes only its own command's."""


async def catalog(mgr: Manager, args: argparse.Namespace, out: Renderer) -> int:
    rows = await mgr.catalog_info()
    if not out.json_mode:
        for line in mgr.host.gpu_lines():
            out.note(line)  # stderr: stdout stays the table
    return table(
        out,
        rows,
        ["component", "source", "variants here", "suggested", "why", "activated"],
        lambda r: [
            r.id,
            r.source,
            ",".join(_here(v.id, v.runs_here) for v in r.variants if v.available),
            r.suggested,
            r.why,
            r.activated or "-",
        ],
        empty="no components",
    )


def _here(variant: str, runs: bool) -> str:
    """A variant as the tables show it: marked when this host's GPUs cannot run it."""
    from ...catalog.host import needed_vendor

    needs = needed_vendor(variant)
    return variant if runs or needs is None else f"{variant}(no {needs[1]} GPU)"


async def releases(mgr: Manager, args: argparse.Namespace, out: Renderer) -> int:
    return table(
        out,
        await mgr.releases(request_in(args, requests.ReleasesQuery)),
        ["tag", "published", "pre", "variants here", "installed"],
        lambda r: [
            r.tag,
            (r.published_at or "")[:10],
            "yes" if r.prerelease else "",
            ",".join(_here(v, r.runs_here is None or v in r.runs_here) for v in r.variants) or "-",
            ",".join(v + " (activated)" if v == r.activated else v for v in r.installed),
        ],
        empty="no releases",
    )


async def install(mgr: Manager, args: argparse.Namespace, out: Renderer) -> int:
    import time

    from ..render import ProgressView, install_summary

    started = time.monotonic()
    with ProgressView(out) as view:
        outcome = await mgr.install(request_in(args, requests.InstallRequest), on_event=view)
    summary = install_summary(outcome, time.monotonic() - started, view)
    if summary:
        out.note(summary)
    return report(out, outcome)


async def uninstall(mgr: Manager, args: argparse.Namespace, out: Renderer) -> int:
    return report(out, await mgr.uninstall(request_in(args, requests.UninstallRequest)))


async def activate(mgr: Manager, args: argparse.Namespace, out: Renderer) -> int:
    if args.canary:
        from .canary import run_canary

        return await run_canary(mgr, args, out, args.build)
    return report(out, await mgr.activate(request_in(args, requests.ActivateRequest)))


def list_builds(mgr: Manager, args: argparse.Namespace, out: Renderer) -> int:
    return table(
        out,
        mgr.list_builds(request_in(args, requests.ListRequest)),
        ["build", "version", "variant", "activated", "pinned by", "size", "path"],
        lambda r: [
            r.id,
            r.version,
            r.variant,
            "yes" if r.activated else "",
            ", ".join(r.pinned_by),
            "-" if r.size_bytes is None else format_size(r.size_bytes),
            r.path,
        ],
        empty='no builds installed; try "backendmgr install llama-server"',
    )


async def doctor(mgr: Manager, args: argparse.Namespace, out: Renderer) -> int:
    from ...api_models import dump

    result = await mgr.doctor(request_in(args, requests.DoctorRequest))
    if out.json_mode:
        out.document(dump(result))
    else:
        for line in result.gpus:
            out.info(line)
        for line in result.fixed:  # each repair, as a sentence
            out.info(line)
        for note in result.notes:
            out.warning(note)
        for problem in result.problems:
            out.error(problem)
        if result.ok:
            n = len(result.notes)
            noted = f" ({n} note{'s' if n > 1 else ''} above)" if n else ""
            out.info(f"everything is consistent{noted}")
    return 0 if result.ok else 1
