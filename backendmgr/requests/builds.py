"""``uninstall``, ``activate``, ``doctor``: the operations on installed builds (``install``,
``releases`` and ``list`` have their own modules, so each of those makes only its request)."""

from typing import Annotated

from ..contract import Arg, Request
from ..immutable import frozen
from ._shared import DRY_RUN, MAX_BUILDS, MAX_ID, NO_GENERATE

__all__ = ["ActivateRequest", "DoctorRequest", "UninstallRequest"]


@frozen(kw_only=True, repr=True, eq=True)
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


@frozen(kw_only=True, repr=True, eq=True)
class ActivateRequest(Request):
    build: Annotated[str, Arg("COMPONENT@VERSION-VARIANT", positional=True, low=1, high=MAX_ID)]
    generate: Annotated[bool, NO_GENERATE] = True
    dry_run: Annotated[bool, DRY_RUN] = False
    force: Annotated[
        bool, Arg("activate even when a model's extra_args uses a flag the build does not list")
    ] = False


@frozen(kw_only=True, repr=True, eq=True)
class DoctorRequest(Request):
    fix: Annotated[bool, Arg("repair what can be repaired")] = False
