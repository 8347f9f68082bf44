"""``install``: one build of a component (its own module: ``install`` makes this one request
and no other)."""

from typing import Annotated

from ..contract import Arg, Request
from ..immutable import frozen
from ._shared import COMPONENT, NO_GENERATE

__all__ = ["InstallRequest"]


@frozen(kw_only=True, repr=True, eq=True)
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
