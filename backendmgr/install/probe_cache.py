"""The capabilities of a manual row's executable, probed on first use and kept in
``<home>/cache/capabilities.json`` by (path, size, mtime). Apart from :mod:`.probe` (which runs
the program on an event loop): a read that finds every row kept loads no event loop.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .._fs import LinkRefused, atomic_write_bytes, read_regular
from ..catalog.capabilities import Capabilities
from ..record import Invalid, load, plain

__all__ = ["CapabilityCache"]

CACHE_FORMAT = 1
MAX_CACHE_BYTES = 8 << 20
MAX_CACHE_ENTRIES = 64


def _stat_key(path: str) -> tuple[str, int, int] | None:
    """The executable a row names (a bare name is looked up on PATH) and its size and mtime."""
    found: str | None = path
    if not (os.sep in path or (os.altsep and os.altsep in path)):
        import shutil  # only here: its archive modules cost every read of a row with a path

        found = shutil.which(path)
    if not found:
        return None
    try:
        st = os.stat(found)
    except OSError:
        return None
    return (
        (str(Path(found).absolute()), st.st_size, st.st_mtime_ns) if os.path.isfile(found) else None
    )


class CapabilityCache:
    """``<home>/cache/capabilities.json``: bounded in size and entries, replaced atomically; a
    file that is too big or malformed is ignored (it only costs a probe)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.entries: dict[str, list[Any]] = {}
        self.dirty = False
        try:
            raw = read_regular(path, MAX_CACHE_BYTES, follow=False)  # never a FIFO's wait
            data = json.loads(raw) if len(raw) <= MAX_CACHE_BYTES else None
            if isinstance(data, dict) and data.get("format") == CACHE_FORMAT:
                entries = data.get("entries")
                if isinstance(entries, dict):
                    self.entries = {
                        k: v
                        for k, v in entries.items()
                        if isinstance(v, list) and len(v) == 3 and isinstance(v[2], dict)
                    }
        except (OSError, ValueError, RecursionError):  # RecursionError: nested too deep
            self.entries = {}

    def get(self, key: tuple[str, int, int]) -> Capabilities | None:
        entry = self.entries.get(key[0])
        if not entry or entry[0] != key[1] or entry[1] != key[2]:
            return None
        try:
            return load(Capabilities, entry[2], "probe cache")
        except Invalid:
            return None

    def put(self, key: tuple[str, int, int], caps: Capabilities) -> None:
        self.entries.pop(key[0], None)
        self.entries[key[0]] = [key[1], key[2], plain(caps)]
        while len(self.entries) > MAX_CACHE_ENTRIES:  # oldest insertion goes first
            del self.entries[next(iter(self.entries))]
        self.dirty = True

    def save(self) -> None:
        if not self.dirty:
            return
        payload = json.dumps({"format": CACHE_FORMAT, "entries": self.entries}).encode()
        if len(payload) > MAX_CACHE_BYTES:
            return
        # a cache that cannot be written (or has a link in its place) only costs time
        with contextlib.suppress(OSError, LinkRefused):
            atomic_write_bytes(self.path, payload, no_links_below=self.path.parent)
        self.dirty = False

    def lookup(
        self,
        path: str,
        *,
        timeout: float | None = None,
        on_wait: Callable[[str], None] | None = None,
    ) -> Capabilities | None:
        """Cached capabilities of the executable at ``path``, probing it when its size or
        mtime changed; None when there is no such executable. ``on_wait`` hears what a probe
        waits for before it starts."""
        key = _stat_key(path)
        if key is None:
            return None
        cached = self.get(key)
        if cached is not None:
            return cached
        from .probe import probe_build_sync, probe_note

        if on_wait is not None:
            on_wait(probe_note(key[0], timeout))
        caps = probe_build_sync(Path(key[0]), timeout=timeout)
        self.put(key, caps)
        return caps
