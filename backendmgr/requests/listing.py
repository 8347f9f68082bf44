"""``list``: the installed builds (its own module: a read makes its one request)."""

from typing import Annotated

from ..contract import Arg, Request
from ..immutable import frozen

__all__ = ["ListRequest"]


@frozen(kw_only=True, repr=True, eq=True)
class ListRequest(Request):
    """``list``: the installed builds, of one component or of all."""

    component: Annotated[
        str | None, Arg("only builds of this component", positional=True, high=200)
    ] = None
