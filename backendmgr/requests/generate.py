"""``generate``, and the regeneration every edit ends with: a module of its own, so an edit
makes no request of the ``models`` commands."""

from typing import Annotated

from ..contract import Arg, Request
from ..immutable import frozen
from ._shared import MAX_PATH

__all__ = ["GenerateRequest"]


@frozen(kw_only=True)
class GenerateRequest(Request):
    """``output`` is the CLI's ``--output`` only: the API writes only the configured file."""

    output: Annotated[
        str | None,
        Arg(
            "write here instead of the configured output",
            metavar="PATH",
            high=MAX_PATH,
            blank=False,
            api=False,
        ),
    ] = None
    force: Annotated[bool, Arg("rewrite even when up to date")] = False
    check: Annotated[bool, Arg("exit 1 when missing or stale")] = False
