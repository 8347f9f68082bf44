"""``default``: the row that becomes the ★ of every class its kind serves."""

from typing import Annotated

from ..contract import Arg, Request
from ..immutable import frozen
from ._shared import NO_GENERATE

__all__ = ["DefaultRequest"]


@frozen(kw_only=True, repr=True, eq=True)
class DefaultRequest(Request):
    row: Annotated[str, Arg("a row id from 'backendmgr backends'", positional=True)]
    generate: Annotated[bool, NO_GENERATE] = True
