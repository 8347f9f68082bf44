"""``set`` and ``unset``: per-model settings."""

from dataclasses import dataclass
from typing import Annotated

from ..contract import Arg, Request
from ._shared import DRY_RUN, NO_GENERATE

__all__ = ["SetRequest", "UnsetRequest"]


@dataclass(frozen=True, kw_only=True)
class SetRequest(Request):
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


@dataclass(frozen=True, kw_only=True)
class UnsetRequest(Request):
    model: Annotated[str, Arg("a model id", positional=True)]
    keys: Annotated[
        list[str],
        Arg("one or more keys; see keys", positional=True, metavar="KEY", low=1, high=20),
    ]
    generate: Annotated[bool, NO_GENERATE] = True
    dry_run: Annotated[bool, DRY_RUN] = False
