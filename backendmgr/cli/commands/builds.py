"""``catalog``, ``releases``, ``install``, ``uninstall``, ``activate``, ``list``, ``doctor``."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from ...limits import RELEASES_LIMIT
from ...units import format_size
from ..parser import usage_check
from .common import add_count, add_dry_run, add_no_generate, command, report, request_of, table

if TYPE_CHECKING:
    from ...manager import Manager
    from ..render import Renderer


def register(sub: argparse._SubParsersAction[Any]) -> None:
    command(sub, "catalog", catalog, help="components, variants here, suggested variant and why")

    r = command(sub, "releases", releases, help="recent versions and the variants each ships here")
    r.add_argument("component", help="a component id from 'backendmgr catalog'")
    r.add_argument("--variant", help="only releases that ship this variant here")
    r.add_argument("--refresh", action="store_true", help="skip the 10-minute cache window")
    limit = f"at most N releases (at most {RELEASES_LIMIT.high:g}, default 10)"
    add_count(r, "--limit", RELEASES_LIMIT, default=10, help=limit)

    i = command(sub, "install", install, help="install a build (VERSION defaults to the latest)")
    i.add_argument("component", help="a component id from 'backendmgr catalog'")
    i.add_argument("version", nargs="?", help="a release tag or version (default: the latest)")
    i.add_argument("--variant", help="cpu, vulkan, cuda, rocm, … (default: suggested for here)")
    i.add_argument("--activate", action="store_true", help="activate it even if another is")
    i.add_argument("--reinstall", action="store_true", help="install again even if installed")
    i.add_argument(
        "--require-checksum", action="store_true", help="refuse assets without a published digest"
    )
    i.add_argument("--no-smoke", action="store_true", help="skip running it with --version")
    i.add_argument("--refresh", action="store_true", help="skip the release-list cache window")
    i.add_argument("--dry-run", action="store_true", help="print the plan, download nothing")
    i.add_argument("--platform", metavar="OS-ARCH", help="with --dry-run: plan for another host")
    add_no_generate(i)
    usage_check(i, _platform_needs_dry_run)

    u = command(sub, "uninstall", uninstall, help="remove installed builds (all or none)")
    u.add_argument("builds", nargs="+", metavar="BUILD", help="COMPONENT@VERSION-VARIANT")
    u.add_argument(
        "--force",
        action="store_true",
        help="even if models are pinned to it, or it is its component's only build",
    )
    add_no_generate(u)
    add_dry_run(u)

    a = command(sub, "activate", activate, help="switch the activated build of a component")
    a.add_argument("build", help="COMPONENT@VERSION-VARIANT")
    add_no_generate(a)
    add_dry_run(a)
    a.add_argument(
        "--force",
        action="store_true",
        help="activate even when a model's extra_args uses a flag the build does not list",
    )
    from .canary import add_canary_options

    add_canary_options(a)

    li = command(sub, "list", list_builds, help="installed builds")
    li.add_argument("component", nargs="?", help="only builds of this component")

    d = command(sub, "doctor", doctor, help="registry vs disk, stale pins, leftovers")
    d.add_argument("--fix", action="store_true", help="repair what can be repaired")


def _platform_needs_dry_run(args: argparse.Namespace) -> str | None:
    if args.platform is not None and not args.dry_run:
        return "--platform describes another machine; use it with --dry-run"
    return None


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
    from ...requests import ReleasesQuery

    return table(
        out,
        await mgr.releases(request_of(ReleasesQuery, args)),
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

    from ...requests import InstallRequest
    from ..render import ProgressView, install_summary

    started = time.monotonic()
    with ProgressView(out) as view:
        request = request_of(InstallRequest, args, smoke=not args.no_smoke)
        outcome = await mgr.install(request, on_event=view)
    summary = install_summary(outcome, time.monotonic() - started, view)
    if summary:
        out.note(summary)
    return report(out, outcome)


async def uninstall(mgr: Manager, args: argparse.Namespace, out: Renderer) -> int:
    from ...requests import UninstallRequest

    request = request_of(UninstallRequest, args)
    return report(out, await mgr.uninstall(request))


async def activate(mgr: Manager, args: argparse.Namespace, out: Renderer) -> int:
    from ...requests import ActivateRequest

    if args.canary:
        from .canary import run_canary

        return await run_canary(mgr, args, out)
    request = request_of(ActivateRequest, args)
    return report(out, await mgr.activate(request))


async def list_builds(mgr: Manager, args: argparse.Namespace, out: Renderer) -> int:
    return table(
        out,
        await mgr.list_builds(args.component),
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
    from ...requests import DoctorRequest

    result = await mgr.doctor(request_of(DoctorRequest, args))
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
