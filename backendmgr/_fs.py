"""Small filesystem helpers shared by the config store, receipts and the generated config."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

__all__ = ["atomic_write_bytes", "fsync_dir", "sanitize_segment"]

_SAFE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")


def sanitize_segment(text: str) -> str:
    """Make ``text`` safe as one path segment: ``../../etc`` stays inside its parent folder."""
    cleaned = "".join(ch if ch in _SAFE else "_" for ch in text)[:64]
    if cleaned in ("", ".", ".."):
        return "unknown" if not cleaned else cleaned.replace(".", "_")
    return cleaned


def fsync_dir(path: Path) -> None:
    """Persist a rename: on POSIX the folder entry itself must reach the disk."""
    if os.name != "posix":
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` so that a reader sees the old file or the new, never half.

    The temporary file sits in the same folder (same filesystem, so the rename is atomic) and
    keeps the old file's permission bits.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode: int | None = path.stat().st_mode & 0o7777
    except FileNotFoundError:
        mode = None
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise
    fsync_dir(path.parent)
