"""What an operation returns: data for ``--json`` and a sentence for people (pipx-style)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["Outcome"]


@dataclass(frozen=True, slots=True)
class Outcome:
    """The result of one mutation: ``data`` is the JSON document, ``message`` the human line."""

    message: str
    data: dict[str, Any]
    changed: bool = True
    warnings: tuple[str, ...] = field(default=())
