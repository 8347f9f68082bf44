"""Ordering of version strings: llama.cpp build tags by number, the rest by packaging."""

from __future__ import annotations

import re

from packaging.version import InvalidVersion, Version

__all__ = ["VersionKey", "version_key"]

_BUILD_TAG = re.compile(r"^b([0-9]{1,18})$", re.IGNORECASE)
# A tag with a longer run of digits is not a version anyone publishes; it sorts as text, so
# that int() never meets a number beyond Python's digit limit (or a costly conversion).
_TOO_MANY_DIGITS = re.compile(r"[0-9]{19}")
MAX_VERSION_CHARS = 256

VersionKey = tuple[int, int, Version | None, str]


def version_key(version: str) -> VersionKey:
    """Sort key where ``b982 < b9100`` and ``0.9.2 < 0.10.0``; unparseable strings sort lowest.

    The leading rank keeps unlike kinds from ever being compared with each other.
    """
    text = version.strip()
    if len(text) > MAX_VERSION_CHARS or _TOO_MANY_DIGITS.search(text):
        return (0, 0, None, version)
    match = _BUILD_TAG.match(text)
    if match:
        return (2, int(match.group(1)), None, "")
    try:
        return (1, 0, Version(text.removeprefix("v")), "")
    except (InvalidVersion, ValueError):
        return (0, 0, None, version)
