"""``sync``, ``lock``, ``fetch``."""

from typing import Annotated

from ..contract import Arg, Request
from ..immutable import frozen
from ._shared import LOCK, LOCK_CLI, MAX_PATH

__all__ = ["FetchRequest", "LockRequest", "SyncRequest"]


@frozen(kw_only=True, repr=True, eq=True)
class SyncRequest(Request):
    """``lock`` is the CLI's LOCK argument only (default, and the API's: beside the config
    file)."""

    lock: Annotated[str | None, LOCK_CLI] = None
    locked: Annotated[
        bool,
        Arg("fail, changing nothing, if the lock is out of date for the builds installed here"),
    ] = False
    prune: Annotated[bool, Arg("remove builds the lock does not list")] = False
    force: Annotated[bool, Arg("with --prune: remove pinned builds too")] = False
    dry_run: Annotated[bool, Arg("say what would change, change nothing")] = False

    def rule(self) -> str | None:
        return "--force only applies with --prune" if self.force and not self.prune else None


@frozen(kw_only=True, repr=True, eq=True)
class LockRequest(Request):
    output: Annotated[
        str | None,
        Arg(
            "where to write it (default: beside the config file)",
            metavar="PATH",
            high=MAX_PATH,
            blank=False,
        ),
    ] = None
    fetch: Annotated[
        str | None,
        Arg(
            "also download every locked asset into DIR, laid out for scripts/mirror.py",
            metavar="DIR",
            high=MAX_PATH,
            blank=False,
        ),
    ] = None


@frozen(kw_only=True, repr=True, eq=True)
class FetchRequest(Request):
    dir: Annotated[
        str,
        Arg(
            "where to lay out <owner>/<repo>/<tag>/<asset>",
            positional=True,
            metavar="DIR",
            high=MAX_PATH,
            blank=False,
        ),
    ]
    lock: Annotated[str | None, LOCK] = None
