"""``unset``: per-model settings cleared."""

from typing import Annotated

from ..contract import Arg, Request
from ..immutable import frozen
from ._shared import DRY_RUN, NO_GENERATE

__all__ = ["UnsetRequest"]


@frozen(kw_only=True, repr=True, eq=True)
class UnsetRequest(Request):
    """``unset``: per-model settings cleared, back to the plan's own."""

    model: Annotated[str, Arg("a model id", positional=True)]
    keys: Annotated[
        list[str],
        Arg("one or more keys; see keys", positional=True, metavar="KEY", low=1, high=20),
    ]
    generate: Annotated[bool, NO_GENERATE] = True
    dry_run: Annotated[bool, DRY_RUN] = False
