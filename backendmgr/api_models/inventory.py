"""``list`` and ``backends``: an installed build and a registry row as shown."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Self

# imported at run time, not only for mypy: pydantic resolves it for the OpenAPI schemas
from ..catalog.capabilities import Capabilities
from ..record import plain
from ..results import Result

if TYPE_CHECKING:
    from ..config.models import BackendRow

__all__ = ["BackendRowInfo", "BuildInfo"]


@dataclass(kw_only=True, repr=False, eq=False)
class BuildInfo(Result):
    """One installed build as ``list`` shows it."""

    id: str
    component: str
    version: str
    variant: str
    activated: bool
    path: str
    dir: str
    size_bytes: int | None
    installed_at: str
    sha256: str | None
    verified_by: str | None
    pinned_by: list[str]
    capabilities: Capabilities | None = None  # what its --help listed at install


@dataclass(kw_only=True, repr=False, eq=False)
class BackendRowInfo(Result):
    """One registry row as ``backends`` shows it, with the classes its kind serves."""

    id: str
    kind: str
    name: str
    path: str
    default: bool
    managed: bool
    component: str
    version: str
    variant: str
    build: bool
    classes: list[str]
    capabilities: Capabilities | None = None  # the row's build, or a manual row's probe

    @classmethod
    def of(cls, row: BackendRow, **more: Any) -> Self:
        """A registry row as shown: its fields, the classes its kind serves, and ``more`` (the
        capabilities; a result's message)."""
        from ..registry.kinds import classes_of

        return cls(**plain(row), classes=sorted(classes_of(row.kind)), **more)
