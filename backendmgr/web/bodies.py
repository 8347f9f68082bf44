"""The API's own request bodies. Every other operation's body is its request from
:mod:`backendmgr.requests` as it is (its bounds declared once for the CLI and the API); these
leave out what names a file on the server (``generate``'s output, ``sync``'s lock), since the
API writes and reads only the configured ones, or carry no more than ``generate``."""

from __future__ import annotations

from ..requests import GenerateRequest as _GenerateRequest
from ..requests import Request
from ..requests import SyncRequest as _SyncRequest

__all__ = ["GenerateFlag", "GenerateRequest", "SyncRequest"]


class GenerateFlag(Request):
    """The body of a change named by its path (activate, default, unpin): only whether to
    regenerate afterwards."""

    generate: bool = True


class GenerateRequest(_GenerateRequest):
    output: None = None  # the configured file only (``--output`` stays the CLI's)


class SyncRequest(_SyncRequest):
    lock: None = None  # the lock beside the config file only
