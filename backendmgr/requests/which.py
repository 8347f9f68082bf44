"""``which``: the executable that would run (its own module: a read makes its one request)."""

from typing import Annotated

from ..contract import Arg, Request
from ..immutable import frozen

__all__ = ["WhichRequest"]


@frozen(kw_only=True)
class WhichRequest(Request):
    """``which``: the executable a model, component or build would run, and why."""

    target: Annotated[
        str,
        Arg(
            "a model, component or build",
            positional=True,
            metavar="MODEL|COMPONENT|BUILD",
        ),
    ]
