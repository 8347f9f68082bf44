"""``unpin``: a model follows the class default again."""

from typing import Annotated

from ..contract import Arg, Request
from ..immutable import frozen
from ._shared import DRY_RUN, NO_GENERATE

__all__ = ["UnpinRequest"]


@frozen(kw_only=True)
class UnpinRequest(Request):
    """``unpin``: the model follows its class default again."""

    model: Annotated[str, Arg("a model id", positional=True)]
    generate: Annotated[bool, NO_GENERATE] = True
    dry_run: Annotated[bool, DRY_RUN] = False
