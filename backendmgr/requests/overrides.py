"""``set``: per-model settings (``unset`` has its own module: a command makes its own request)."""

from typing import Annotated

from ..contract import Arg, Request
from ..immutable import frozen
from ._shared import DRY_RUN, NO_GENERATE

__all__ = ["SetRequest"]


@frozen(kw_only=True)
class SetRequest(Request):
    """``set``: per-model settings as typed, checked against the override's fields."""

    model: Annotated[
        str,
        Arg("a model id from 'backendmgr models' (or one not found yet)", positional=True),
    ]
    values: Annotated[
        dict[str, str],
        Arg("one or more settings; see keys", positional=True, metavar="KEY=VALUE", low=1, high=20),
    ]
    generate: Annotated[bool, NO_GENERATE] = True
    dry_run: Annotated[bool, DRY_RUN] = False
