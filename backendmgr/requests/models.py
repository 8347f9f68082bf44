"""``models add|remove`` (the folders) and ``cmd``."""

from typing import Annotated

from ..contract import Arg, Request
from ..immutable import frozen
from ._shared import DRY_RUN, MAX_PATH, MODEL, NO_GENERATE

__all__ = ["CmdRequest", "ModelsDirRequest"]


@frozen(kw_only=True, repr=True, eq=True)
class ModelsDirRequest(Request):
    """``models add-dir`` (``add``) and ``models remove-dir``: the subcommand sets ``add``."""

    path: Annotated[
        str, Arg("the folder (~ is expanded)", positional=True, metavar="PATH", high=MAX_PATH)
    ]
    add: Annotated[bool, Arg("add the folder (else remove it)")]
    generate: Annotated[bool, NO_GENERATE] = True
    dry_run: Annotated[bool, DRY_RUN] = False


@frozen(kw_only=True, repr=True, eq=True)
class CmdRequest(Request):
    """``cmd``: the command line one model gets."""

    model: Annotated[str, MODEL]
