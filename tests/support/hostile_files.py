"""What may sit in a cache file's place: JSON nested too deep to parse, a FIFO (whose open waits
for a writer), a link to ``/dev/zero`` (read for ever). Each must read as no cache."""

from __future__ import annotations

import os
from pathlib import Path

KINDS = ("deep", "fifo", "link")


def plant(path: Path, kind: str) -> None:
    """Put a hostile ``kind`` (one of :data:`KINDS`) at ``path``, which must not exist."""
    if kind == "deep":
        path.write_text("[" * 100_000 + "]" * 100_000)
    elif kind == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to("/dev/zero")
