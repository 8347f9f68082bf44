"""The registry's rows and the per-model settings: ``backends add|remove``, ``default``,
``pin``, ``unpin``, ``set``, ``unset``."""

from dataclasses import dataclass
from typing import Annotated

from ..contract import Arg, Request
from ._shared import DRY_RUN, MAX_PATH, MODEL, NO_GENERATE

__all__ = [
    "AddBackendRequest",
    "DefaultRequest",
    "PinRequest",
    "RemoveBackendRequest",
    "SetRequest",
    "UnpinRequest",
    "UnsetRequest",
]


@dataclass(frozen=True, kw_only=True)
class AddBackendRequest(Request):
    """``id`` is checked by the registry's own rule (a malformed id, exit 2), not a length."""

    id: Annotated[str, Arg("a new row id (no '@', not a catalog component id)", positional=True)]
    kind: Annotated[str, Arg("llama, vllm, sd, tts, asr, audiocpp, …, or custom", high=100)]
    path: Annotated[str, Arg("the executable", high=MAX_PATH)]
    name: Annotated[str, Arg("a display name", high=200)] = ""
    force: Annotated[bool, Arg("accept a path that is missing or not executable")] = False
    default: Annotated[bool, Arg("make it the ★ of its classes")] = False
    generate: Annotated[bool, NO_GENERATE] = True


@dataclass(frozen=True, kw_only=True)
class RemoveBackendRequest(Request):
    id: Annotated[str, Arg("a manual row id from 'backendmgr backends'", positional=True)]
    generate: Annotated[bool, NO_GENERATE] = True


@dataclass(frozen=True, kw_only=True)
class DefaultRequest(Request):
    row: Annotated[str, Arg("a row id from 'backendmgr backends'", positional=True)]
    generate: Annotated[bool, NO_GENERATE] = True


@dataclass(frozen=True, kw_only=True)
class PinRequest(Request):
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


@dataclass(frozen=True, kw_only=True)
class UnpinRequest(Request):
    model: Annotated[str, Arg("a model id", positional=True)]
    generate: Annotated[bool, NO_GENERATE] = True
    dry_run: Annotated[bool, DRY_RUN] = False


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
