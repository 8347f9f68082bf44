"""The API's request bodies: each operation's own request (:mod:`backendmgr.requests`, where
its bounds are declared once for the CLI and the API alike), less the two fields that name a
file on the server (``generate``'s output, ``sync``'s lock): the API writes and reads only the
configured ones."""

from __future__ import annotations

from ..requests import (
    AddBackendRequest,
    CacheCleanRequest,
    DoctorRequest,
    InstallRequest,
    PinRequest,
    PruneRequest,
    Request,
    SetRequest,
    UninstallRequest,
    UnsetRequest,
    UpdateRequest,
    VerifyRequest,
)
from ..requests import GenerateRequest as _GenerateRequest
from ..requests import SyncRequest as _SyncRequest

__all__ = [
    "AddBackendRequest",
    "Body",
    "CacheCleanRequest",
    "DoctorRequest",
    "GenerateFlag",
    "GenerateRequest",
    "InstallRequest",
    "PinRequest",
    "PruneRequest",
    "SetRequest",
    "SyncRequest",
    "UninstallRequest",
    "UnsetRequest",
    "UpdateRequest",
    "VerifyRequest",
]

Body = Request


class GenerateFlag(Request):
    """The body of a change named by its path (activate, default, unpin): only whether to
    regenerate afterwards."""

    generate: bool = True


class GenerateRequest(_GenerateRequest):
    output: None = None  # the configured file only (``--output`` stays the CLI's)


class SyncRequest(_SyncRequest):
    lock: None = None  # the lock beside the config file only
