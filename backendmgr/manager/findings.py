"""What ``doctor`` and ``generate --check`` find wrong with the written llama-swap config: a
module of its own, loaded by them and not by every edit's regeneration."""

from __future__ import annotations

from ..errors import BackendmgrError, Refused
from ..immutable import frozen

__all__ = ["Finding"]


@frozen
class Finding:
    """One thing wrong with the written llama-swap config. ``problem``: ``doctor`` fails on
    it (a missing or stale file is a note: the next change rewrites it); ``generate --check``
    fails on any, raising ``error``."""

    text: str
    problem: bool
    error: type[BackendmgrError] = Refused
