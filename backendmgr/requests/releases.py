"""``releases``: what a component published, and the variants each release ships here."""

from typing import Annotated

from ..contract import Arg, Request
from ..immutable import frozen
from ..limits import RELEASES_LIMIT
from ._shared import COMPONENT

__all__ = ["ReleasesQuery"]


@frozen(kw_only=True, repr=True, eq=True)
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
