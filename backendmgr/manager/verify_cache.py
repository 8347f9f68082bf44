"""Where ``verify`` keeps its results: one file under the data home, keyed by the entry's
command line and the build it runs (the receipt of a managed build; path, size and mtime of
any other executable), so an entry whose command or build changed reads "not verified" again.
``models`` reads it; ``verify`` writes it."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._fs import read_record_file
from ..digest import sha256_hex
from ..install.builds import BuildStore
from .facts import build_identity

if TYPE_CHECKING:  # the results' module is loaded by what reads or writes one (not ``which``)
    from datetime import datetime

    from ..api_models import VerifyResult
    from ..emit.plan import Entry

__all__ = ["VerifyCache", "verified_text"]

CACHE_NAME = "verify.json"
CACHE_VERSION = 1
CACHE_CAP = 4 << 20  # bytes read from the cache; a larger file is ignored
REASON_SHOWN = 100
"""Characters of a failure's reason that ``models`` shows beside the entry."""


def _read(path: Path) -> dict[str, dict[str, Any]]:
    """The cached results by model id; an unreadable, oversized or foreign file is empty."""
    entries = read_record_file(path, CACHE_CAP, CACHE_VERSION, "entries")
    return {k: v for k, v in entries.items() if isinstance(v, dict)}


class VerifyCache:
    """The results file, and what makes a result still true (:meth:`key`)."""

    def __init__(self, home: Path, locks: Path, builds: BuildStore, environ: Mapping[str, str]):
        self.path = home / CACHE_NAME
        self._locks = locks
        self._builds = builds
        self._environ = environ

    def read(self) -> dict[str, dict[str, Any]]:
        return _read(self.path)

    def key(self, entry: Entry) -> str:
        """The cache key: the command line, the build it runs and its ``env`` (when it has one,
        so that keys of entries without one stay as they were)."""
        from ..emit.entries import entry_env

        env = entry_env(entry)  # issue 24: another device is another result
        parts: list[Any] = [
            entry.argv,
            build_identity(self._builds, self._environ, entry.resolution.row, entry.argv[0]),
            *([env] if env else []),
        ]
        text = json.dumps(parts, ensure_ascii=True)
        return sha256_hex(text.encode())

    def result(self, entry: Entry, cache: Mapping[str, dict[str, Any]]) -> VerifyResult | None:
        """The cached result for ``entry`` when its command and build are unchanged (a record
        of the wrong shape reads as not verified)."""
        record = cache.get(entry.model.id)
        if record is None or record.get("key") != self.key(entry):
            return None
        return _loaded({k: v for k, v in record.items() if k != "key"})

    def record(self, entry: Entry, result: VerifyResult) -> None:
        """Add one result: a locked read-modify-write, written atomically."""
        from filelock import FileLock

        from .._fs import atomic_write_bytes
        from ..api_models import dump

        self._locks.mkdir(parents=True, exist_ok=True)
        with FileLock(self._locks / "verify.lock", timeout=30):
            entries = _read(self.path)
            entries[result.id] = {**dump(result, every=True), "key": self.key(entry)}
            body = json.dumps({"version": CACHE_VERSION, "entries": entries}, indent=1)
            atomic_write_bytes(self.path, body.encode(), no_links_below=self.path.parent)


def _loaded(data: dict[str, Any]) -> VerifyResult | None:
    """A cached result as verify wrote it, read strictly (what backendmgr wrote); a record of
    the wrong shape is None (not verified)."""
    from ..api_models import VerifyResult
    from ..record import Invalid, load

    try:
        return load(VerifyResult, data, "verify cache")
    except Invalid:
        return None


def verified_text(record: VerifyResult | None, now: datetime | None = None) -> str:
    """``verified today: ok in 1.0 s, 6.31 GiB`` or ``not verified``."""
    if record is None:
        return "not verified"
    from datetime import UTC, datetime  # a result to date: most models have none

    try:
        when = datetime.fromisoformat(str(record.verified_at))
    except ValueError:
        return "not verified"
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    days = ((now or datetime.now(UTC)).date() - when.astimezone(UTC).date()).days
    ago = {0: "today", 1: "yesterday"}.get(days, f"{days} days ago")
    if record.ok:
        parts = [f"ok in {record.ready_s or 0:.1f} s"]
        if record.gpu_gib is not None:
            parts.append(f"{record.gpu_gib:.2f} GiB")
        return f"verified {ago}: " + ", ".join(parts)
    reason = (record.reason or "unknown reason").split(" | ")[0]
    if len(reason) > REASON_SHOWN:  # the whole output is in verify's own report, not here
        reason = reason[: REASON_SHOWN - 1] + "…"
    return f"verified {ago}: failed ({reason})"
