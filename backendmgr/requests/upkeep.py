"""``update``, ``prune``, ``cache clean``."""

from dataclasses import field
from typing import Annotated

from ..contract import Arg, Request
from ..immutable import frozen
from ..limits import PRUNE_KEEP
from ._shared import MAX_COMPONENTS, NO_GENERATE

__all__ = ["CacheCleanRequest", "PruneRequest", "UpdateRequest"]


@frozen(kw_only=True, repr=True, eq=True)
class UpdateRequest(Request):
    components: Annotated[
        list[str],
        Arg("default: every one", positional=True, metavar="COMPONENT", high=MAX_COMPONENTS),
    ] = field(default_factory=list)
    dry_run: Annotated[bool, Arg("say what would change, change nothing")] = False
    generate: Annotated[bool, NO_GENERATE] = True
    force: Annotated[
        bool,
        Arg("activate even when a model's extra_args uses a flag the new build does not list"),
    ] = False


@frozen(kw_only=True, repr=True, eq=True)
class PruneRequest(Request):
    component: Annotated[str | None, Arg("default: every component", positional=True, high=200)] = (
        None
    )
    keep: Annotated[
        int,
        Arg(
            "keep the N newest builds (%(default)s; at most {high})",
            metavar="N",
            bounds=PRUNE_KEEP,
        ),
    ] = 1
    dry_run: Annotated[bool, Arg("list what would go, remove nothing")] = False
    generate: Annotated[bool, NO_GENERATE] = True


@frozen(kw_only=True, repr=True, eq=True)
class CacheCleanRequest(Request):
    dry_run: Annotated[bool, Arg("report, remove nothing")] = False
