"""``pin``: which row one model runs on (``unpin`` has its own module)."""

from typing import Annotated

from ..contract import Arg, Request
from ..immutable import frozen
from ._shared import DRY_RUN, MODEL, NO_GENERATE

__all__ = ["PinRequest"]


@frozen(kw_only=True)
class PinRequest(Request):
    """``pin``: one model kept on one registry row, whatever the class default is."""

    model: Annotated[str, MODEL]
    row: Annotated[
        str,
        Arg(
            "a row id from 'backendmgr backends', e.g. llama-server@b10800-rocm",
            positional=True,
        ),
    ]
    generate: Annotated[bool, NO_GENERATE] = True
    dry_run: Annotated[bool, DRY_RUN] = False
    force: Annotated[
        bool, Arg("pin even when the model's extra_args uses a flag the build does not list")
    ] = False
