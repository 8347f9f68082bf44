"""What kind of archive an asset is, by its name, and the unpack's overall size bound: all an
install needs before its download starts. The unpacking machinery (extract.py: tarfile,
zipfile, ISA-L, the writing threads) loads in the unpacking thread, beside the download."""

from __future__ import annotations

__all__ = ["MAX_TOTAL", "STREAMABLE", "archive_format", "streamable"]

MAX_TOTAL = 32 << 30
STREAMABLE = (".tar.gz", ".tgz", ".tar.xz", ".txz", ".zip")  # a zip: install/zipstream.py
_KINDS = (
    (".zip", "zip"),
    (".tar.gz", "tar"),
    (".tgz", "tar"),
    (".tar.xz", "tar"),
    (".txz", "tar"),
    (".tar.zst", "tar.zst"),
    (".tzst", "tar.zst"),
    (".tar", "tar"),
)


def archive_format(name: str) -> str:
    lowered = name.lower()
    for suffix, kind in _KINDS:
        if lowered.endswith(suffix):
            return kind
    return "bare"


def streamable(asset_name: str) -> bool:
    """A compressed tar (read front to back) or a zip (its local headers, checked against
    its central directory at the end): unpacked while it downloads."""
    return asset_name.lower().endswith(STREAMABLE)
