"""``pin`` and ``unpin``: the row one model runs on."""

from __future__ import annotations

from dataclasses import dataclass

from ._shared import Previewed

__all__ = ["PinResult"]


@dataclass(kw_only=True, repr=False, eq=False)
class PinResult(Previewed):
    """``pin`` and ``unpin``: the model and the row it is pinned to (None: unpinned)."""

    model: str
    backend: str | None
