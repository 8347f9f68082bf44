"""``catalog``, ``releases``, ``install``, ``uninstall``, ``activate``, ``list``, ``doctor``."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from ...limits import RELEASES_LIMIT
from ..render import format_size
from .common import add_no_generate, report

if TYPE_CHECKING:
    from ...manager import Manager
    from ..render import Renderer


def register(sub: argparse._SubParsersAction[Any]) -> None:
    c = sub.add_parser("catalog", help="components, variants here, suggested variant and why")
    c.set_defaults(handler=catalog)

    r = sub.add_parser("releases", help="recent versions and the variants each ships here")
    r.add_argument("component", help="a component id from 'backendmgr catalog'")
    r.add_argument("--variant", help="only releases that ship this variant here")
    r.add_argument("--refresh", action="store_true", help="skip the 10-minute cache window")
    r.add_argument(
        "--limit",
        type=RELEASES_LIMIT.argument(),
        default=10,
        metavar="N",
        help=f"at most N releases (at most {RELEASES_LIMIT.high:g}, default 10)",
    )
    r.set_defaults(handler=releases)

    i = sub.add_parser("install", help="install a build (VERSION defaults to the latest)")
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
    i.set_defaults(handler=install)

    u = sub.add_parser("uninstall", help="remove installed builds (all or none)")
    u.add_argument("builds", nargs="+", metavar="BUILD", help="COMPONENT@VERSION-VARIANT")
    u.add_argument(
        "--force",
        action="store_true",
        help="even if models are pinned to it, or it is its component's only build",
    )
    add_no_generate(u)
    u.set_defaults(handler=uninstall)

    a = sub.add_parser("activate", help="switch the activated build of a component")
    a.add_argument("build", help="COMPONENT@VERSION-VARIANT")
    add_no_generate(a)
    a.set_defaults(handler=activate)

    li = sub.add_parser("list", help="installed builds")
    li.add_argument("component", nargs="?", help="only builds of this component")
    li.set_defaults(handler=list_builds)

    d = sub.add_parser("doctor", help="registry vs disk, stale pins, leftovers")
    d.add_argument("--fix", action="store_true", help="repair what can be repaired")
    d.set_defaults(handler=doctor)


async def catalog(mgr: Manager, args: argparse.Namespace, out: Renderer) -> int:
    from ...api_models import dump

    rows = await mgr.catalog_info()
    if out.json_mode:
        out.document(dump(rows))
        return 0
    for line in mgr.host.gpu_lines():
        out.note(line)  # stderr: stdout stays the table
    out.table(
        ["component", "source", "variants here", "suggested", "why", "activated"],
        [
            [
                r.id,
                r.source,
                ",".join(v.id for v in r.variants if v.available),
                r.suggested,
                r.why,
                r.activated or "-",
            ]
            for r in rows
        ],
        empty="no components",
    )
    return 0


async def releases(mgr: Manager, args: argparse.Namespace, out: Renderer) -> int:
    from ...api_models import dump
    from ...requests import ReleasesQuery

    rows = await mgr.releases(
        ReleasesQuery.of(
            component=args.component, variant=args.variant, refresh=args.refresh, limit=args.limit
        )
    )
    if out.json_mode:
        out.document(dump(rows))
        return 0
    out.table(
        ["tag", "published", "pre", "variants here", "installed"],
        [
            [
                r.tag,
                (r.published_at or "")[:10],
                "yes" if r.prerelease else "",
                ",".join(r.variants) or "-",
                ",".join(v + " (activated)" if v == r.activated else v for v in r.installed),
            ]
            for r in rows
        ],
        empty="no releases",
    )
    return 0


async def install(mgr: Manager, args: argparse.Namespace, out: Renderer) -> int:
    import time

    from ...requests import InstallRequest
    from ..render import ProgressView, install_summary

    started = time.monotonic()
    with ProgressView(out) as view:
        request = InstallRequest.of(
            component=args.component,
            version=args.version,
            variant=args.variant,
            activate=args.activate,
            reinstall=args.reinstall,
            require_checksum=args.require_checksum,
            smoke=not args.no_smoke,
            dry_run=args.dry_run,
            platform=args.platform,
            refresh=args.refresh,
            generate=not args.no_generate,
        )
        outcome = await mgr.install(request, on_event=view)
    summary = install_summary(outcome, time.monotonic() - started)
    if summary:
        out.note(summary)
    return report(out, outcome)


async def uninstall(mgr: Manager, args: argparse.Namespace, out: Renderer) -> int:
    from ...requests import UninstallRequest

    request = UninstallRequest.of(
        builds=args.builds, force=args.force, generate=not args.no_generate
    )
    return report(out, await mgr.uninstall(request))


async def activate(mgr: Manager, args: argparse.Namespace, out: Renderer) -> int:
    from ...requests import ActivateRequest

    request = ActivateRequest.of(build=args.build, generate=not args.no_generate)
    return report(out, await mgr.activate(request))


async def list_builds(mgr: Manager, args: argparse.Namespace, out: Renderer) -> int:
    from ...api_models import dump

    rows = await mgr.list_builds(args.component)
    if out.json_mode:
        out.document(dump(rows))
        return 0
    out.table(
        ["build", "version", "variant", "activated", "pinned by", "size", "path"],
        [
            [
                r.id,
                r.version,
                r.variant,
                "yes" if r.activated else "",
                ", ".join(r.pinned_by),
                "-" if r.size_bytes is None else format_size(r.size_bytes),
                r.path,
            ]
            for r in rows
        ],
        empty='no builds installed; try "backendmgr install llama-server"',
    )
    return 0


async def doctor(mgr: Manager, args: argparse.Namespace, out: Renderer) -> int:
    from ...api_models import dump
    from ...requests import DoctorRequest

    result = await mgr.doctor(DoctorRequest(fix=args.fix))
    if out.json_mode:
        out.document(dump(result))
    else:
        for line in result.gpus:
            out.info(line)
        for path in result.fixed:
            out.info(f"removed {path}")
        for note in result.notes:
            out.warning(note)
        for problem in result.problems:
            out.error(problem)
        if result.ok:
            n = len(result.notes)
            noted = f" ({n} note{'s' if n > 1 else ''} above)" if n else ""
            out.info(f"everything is consistent{noted}")
    return 0 if result.ok else 1
