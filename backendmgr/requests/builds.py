"""``catalog``, ``releases``, ``install``, ``uninstall``, ``activate``, ``list``, ``doctor``."""

from dataclasses import dataclass
from typing import Annotated

from ..contract import Arg, Request
from ..limits import RELEASES_LIMIT
from ._shared import COMPONENT, DRY_RUN, MAX_BUILDS, MAX_ID, NO_GENERATE

__all__ = [
    "ActivateRequest",
    "DoctorRequest",
    "InstallRequest",
    "ListRequest",
    "ReleasesQuery",
    "UninstallRequest",
]


@dataclass(frozen=True, kw_only=True)
class ReleasesQuery(Request):
    component: Annotated[str, COMPONENT]
    variant: Annotated[str | None, Arg("only releases that ship this variant here", high=100)] = (
        None
    )
    refresh: Annotated[bool, Arg("skip the 10-minute cache window")] = False
    limit: Annotated[
        int,
        Arg(
            "at most N releases (at most {high}, default %(default)s)",
            metavar="N",
            bounds=RELEASES_LIMIT,
        ),
    ] = 10
    platform: Annotated[  # Python callers only: the installed marks are this host's
        str | None, Arg("list for another host's OS and CPU", high=100, cli=False)
    ] = None


@dataclass(frozen=True, kw_only=True)
class InstallRequest(Request):
    """``dry_run`` and ``platform`` plan without installing (``platform`` needs ``dry_run``)."""

    component: Annotated[str, COMPONENT]
    version: Annotated[
        str | None,
        Arg("a release tag or version (default: the latest)", positional=True),
    ] = None  # its length and characters: ``tag_problem``, as a listing's (in ``rule``)
    variant: Annotated[
        str | None, Arg("cpu, vulkan, cuda, rocm, … (default: suggested for here)", high=100)
    ] = None
    activate: Annotated[bool, Arg("activate it even if another is")] = False
    reinstall: Annotated[bool, Arg("install again even if installed")] = False
    require_checksum: Annotated[bool, Arg("refuse assets without a published digest")] = False
    smoke: Annotated[bool, Arg("skip running it with --version", flag="--no-smoke")] = True
    refresh: Annotated[bool, Arg("skip the release-list cache window")] = False
    dry_run: Annotated[bool, Arg("print the plan, download nothing")] = False
    platform: Annotated[
        str | None, Arg("with --dry-run: plan for another host", metavar="OS-ARCH", high=100)
    ] = None
    generate: Annotated[bool, NO_GENERATE] = True

    def rule(self) -> str | None:
        if self.platform is not None and not self.dry_run:
            return "--platform describes another machine; use it with --dry-run"
        if self.version is not None:
            # a version no release may carry (a newline, a bidi override) is refused before
            # anything starts, with the reason the release listing gives
            from ..sources.models import tag_problem

            problem = tag_problem(self.version)
            if problem is not None:
                return f"version: {problem[:1].lower()}{problem[1:]}"
        return None


@dataclass(frozen=True, kw_only=True)
class ListRequest(Request):
    component: Annotated[
        str | None, Arg("only builds of this component", positional=True, high=200)
    ] = None


@dataclass(frozen=True, kw_only=True)
class UninstallRequest(Request):
    builds: Annotated[
        list[str],
        Arg("COMPONENT@VERSION-VARIANT", positional=True, metavar="BUILD", low=1, high=MAX_BUILDS),
    ]
    force: Annotated[
        bool, Arg("even if models are pinned to it, or it is its component's only build")
    ] = False
    generate: Annotated[bool, NO_GENERATE] = True
    dry_run: Annotated[bool, DRY_RUN] = False  # every check, the plan and the diff; no removal


@dataclass(frozen=True, kw_only=True)
class ActivateRequest(Request):
    build: Annotated[str, Arg("COMPONENT@VERSION-VARIANT", positional=True, low=1, high=MAX_ID)]
    generate: Annotated[bool, NO_GENERATE] = True
    dry_run: Annotated[bool, DRY_RUN] = False
    force: Annotated[
        bool, Arg("activate even when a model's extra_args uses a flag the build does not list")
    ] = False


@dataclass(frozen=True, kw_only=True)
class DoctorRequest(Request):
    fix: Annotated[bool, Arg("repair what can be repaired")] = False
