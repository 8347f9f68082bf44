"""Check a download against what the release published (SPEC §7.2). Fail closed."""

from __future__ import annotations

import re
from typing import Literal

from ..errors import VerificationError
from ..sources.models import ReleaseAsset
from .download import Downloaded, discard

__all__ = ["VerifiedBy", "parse_checksums", "verify"]

VerifiedBy = Literal["digest", "checksums", "none"]
_LINE = re.compile(r"^([0-9a-fA-F]{64})\s+\*?(.+?)\s*$")
_BSD = re.compile(r"^SHA256 \((.+)\) = ([0-9a-fA-F]{64})\s*$")


def parse_checksums(text: str) -> dict[str, str]:
    """``sha256sum`` and BSD-style lines → {file name: hex digest}."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        if m := _LINE.match(line.strip()):
            out[m.group(2).strip().lstrip("./")] = m.group(1).lower()
        elif m := _BSD.match(line.strip()):
            out[m.group(1).strip()] = m.group(2).lower()
    return out


def verify(
    asset: ReleaseAsset,
    got: Downloaded,
    *,
    checksums: dict[str, str] | None = None,
    require_checksum: bool = False,
) -> VerifiedBy:
    """Size, then the API's digest, else the checksum file; a mismatch deletes the part file."""
    if asset.size is not None and got.size != asset.size:
        discard(got.path)
        raise VerificationError(
            f"{asset.name} is {got.size} bytes but the release says {asset.size}; nothing was "
            "installed, try again"
        )
    expected, source = asset.sha256, "digest"
    if expected is None and checksums is not None and asset.name in checksums:
        expected, source = checksums[asset.name], "checksums"
    if expected is None:
        if require_checksum:
            discard(got.path)
            raise VerificationError(
                f"{asset.name} has no published checksum and a checksum is required"
            )
        return "none"
    if got.sha256 != expected.lower():
        discard(got.path)
        raise VerificationError(
            f"{asset.name} SHA-256 {got.sha256[:16]}… does not match the published "
            f"{expected[:16]}… ({source}); nothing was installed"
        )
    return "digest" if source == "digest" else "checksums"
