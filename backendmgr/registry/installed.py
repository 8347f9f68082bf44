"""The builds installed here, as the registry needs them, and their order (newest first).

A module of its own: only a machine with a build installed makes one, and ordering versions
loads ``packaging`` (:mod:`backendmgr.versioning`); :mod:`.rows` imports it where a build is.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from ..immutable import frozen
from ..record import Record
from ..versioning import VersionKey, version_key
from .build_ids import build_row_id

__all__ = ["InstalledBuild", "build_age_key", "newest_first"]


@frozen(kw_only=True)
class InstalledBuild(Record):
    """What the build store knows about one committed build, as the registry needs it."""

    component: str
    version: str
    variant: str
    exe: str
    kind: str
    name: str = ""
    installed_at: datetime | None = None

    @property
    def build_id(self) -> str:
        return build_row_id(self.component, self.version, self.variant)


def build_age_key(build: InstalledBuild) -> tuple[VersionKey, float]:
    """Orders builds oldest to newest: version first, then install time."""
    return version_key(build.version), build.installed_at.timestamp() if build.installed_at else 0


def newest_first(builds: Iterable[InstalledBuild]) -> list[InstalledBuild]:
    """Highest version first; equal versions by install time, newest first."""
    return sorted(builds, key=build_age_key, reverse=True)
