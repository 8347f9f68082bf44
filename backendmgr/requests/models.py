"""``models add|remove`` (the folders), ``cmd``, ``generate``."""

from dataclasses import dataclass
from typing import Annotated

from ..contract import Arg, Request
from ._shared import DRY_RUN, MAX_PATH, MODEL, NO_GENERATE

__all__ = ["CmdRequest", "GenerateRequest", "ModelsDirRequest"]


@dataclass(frozen=True, kw_only=True)
class ModelsDirRequest(Request):
    """``models add-dir`` (``add``) and ``models remove-dir``: the subcommand sets ``add``."""

    path: Annotated[
        str, Arg("the folder (~ is expanded)", positional=True, metavar="PATH", high=MAX_PATH)
    ]
    add: Annotated[bool, Arg("add the folder (else remove it)")]
    generate: Annotated[bool, NO_GENERATE] = True
    dry_run: Annotated[bool, DRY_RUN] = False


@dataclass(frozen=True, kw_only=True)
class CmdRequest(Request):
    model: Annotated[str, MODEL]


@dataclass(frozen=True, kw_only=True)
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
