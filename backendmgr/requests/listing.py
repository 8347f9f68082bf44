"""``list``: the installed builds (its own module: a read makes its one request)."""

from dataclasses import dataclass
from typing import Annotated

from ..contract import Arg, Request

__all__ = ["ListRequest"]


@dataclass(frozen=True, kw_only=True)
class ListRequest(Request):
    """``list``: the installed builds, of one component or of all."""

    component: Annotated[
        str | None, Arg("only builds of this component", positional=True, high=200)
    ] = None
