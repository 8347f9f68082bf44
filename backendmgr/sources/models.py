"""Releases and their assets as the rest of backendmgr sees them, whatever served them."""

from __future__ import annotations

from datetime import datetime

from ..immutable import frozen
from ..record import Record
from ..versioning import version_key

__all__ = ["MAX_TAG_CHARS", "Release", "ReleaseAsset", "newest_releases_first", "tag_problem"]

MAX_TAG_CHARS = 200
"""Longest release tag or package version used: it becomes part of a build id, a folder name,
YAML and a terminal line (the API's ``version`` field has the same bound)."""


def tag_problem(tag: str) -> str | None:
    """Why a release tag (or package version) cannot name a build, or None: blank, longer than
    :data:`MAX_TAG_CHARS`, or holding a control or format character (a newline and YAML, a
    right-to-left override that spoofs the name on screen). Checked where releases are read,
    before anything is written."""
    from ..config.models import id_problem

    return id_problem(tag, "release tag", MAX_TAG_CHARS)


@frozen(kw_only=True)
class ReleaseAsset(Record):
    name: str
    url: str
    size: int | None = None
    digest: str | None = None  # "sha256:<hex>" where the API publishes one

    @property
    def sha256(self) -> str | None:
        if self.digest and self.digest.lower().startswith("sha256:"):
            return self.digest.split(":", 1)[1].lower()
        return None


@frozen(kw_only=True)
class Release(Record):
    tag: str
    name: str = ""
    published_at: datetime | None = None
    prerelease: bool = False
    assets: tuple[ReleaseAsset, ...] = ()


def newest_releases_first(releases: list[Release]) -> list[Release]:
    """Build tags and versions compare as numbers; otherwise publication time decides."""
    keys = [version_key(r.tag) for r in releases]
    if releases and all(k[0] > 0 for k in keys) and len({k[0] for k in keys}) == 1:
        return [
            r for _, r in sorted(zip(keys, releases, strict=True), key=lambda p: p[0], reverse=True)
        ]
    return sorted(
        releases,
        key=lambda r: r.published_at.timestamp() if r.published_at else 0.0,
        reverse=True,
    )
