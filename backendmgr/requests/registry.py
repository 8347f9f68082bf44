"""The registry's manual rows: ``backends add|remove`` (``default`` has its own module: a
``backends`` read makes these two, ``default`` its one)."""

from typing import Annotated

from ..contract import Arg, Request
from ..immutable import frozen
from ._shared import MAX_PATH, NO_GENERATE

__all__ = ["AddBackendRequest", "RemoveBackendRequest"]


@frozen(kw_only=True, repr=True, eq=True)
class AddBackendRequest(Request):
    """``id`` is checked by the registry's own rule (a malformed id, exit 2), not a length."""

    id: Annotated[str, Arg("a new row id (no '@', not a catalog component id)", positional=True)]
    kind: Annotated[str, Arg("llama, vllm, sd, tts, asr, audiocpp, …, or custom", high=100)]
    path: Annotated[str, Arg("the executable", high=MAX_PATH)]
    name: Annotated[str, Arg("a display name", high=200)] = ""
    force: Annotated[bool, Arg("accept a path that is missing or not executable")] = False
    default: Annotated[bool, Arg("make it the ★ of its classes")] = False
    generate: Annotated[bool, NO_GENERATE] = True


@frozen(kw_only=True, repr=True, eq=True)
class RemoveBackendRequest(Request):
    id: Annotated[str, Arg("a manual row id from 'backendmgr backends'", positional=True)]
    generate: Annotated[bool, NO_GENERATE] = True
