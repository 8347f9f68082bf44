"""Ordering of version strings: llama.cpp build tags by number, the rest by packaging."""

from __future__ import annotations

import re

from packaging.version import InvalidVersion, Version

__all__ = ["VersionKey", "version_key"]

_BUILD_TAG = re.compile(r"^b(\d+)$", re.IGNORECASE)

VersionKey = tuple[int, int, Version | None, str]


def version_key(version: str) -> VersionKey:
    """Sort key where ``b982 < b9100`` and ``0.9.2 < 0.10.0``; unparseable strings sort lowest.

    The leading rank keeps unlike kinds from ever being compared with each other.
    """
    match = _BUILD_TAG.match(version.strip())
    if match:
        return (2, int(match.group(1)), None, "")
    try:
        return (1, 0, Version(version.strip().removeprefix("v")), "")
    except InvalidVersion:
        return (0, 0, None, version)
