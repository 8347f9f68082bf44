"""The files of measured records: ``tuned.json`` (``bench`` keeps ``bench.json`` the same
way), read whole, written under a lock and atomically. Apart from what a record is and how a
plan uses it (:mod:`.tuned`, :mod:`.bench`): a plan on a home that has measured nothing finds
no file here and makes no record class (``which``)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._fs import read_record_file, read_regular
from ..record import Record, plain

if TYPE_CHECKING:
    from ..config.paths import Paths

__all__ = ["BENCH_NAME", "TUNED_CAP", "TUNED_NAME", "TUNED_VERSION", "BenchStore", "TunedStore"]

TUNED_NAME = "tuned.json"
TUNED_VERSION = 1
TUNED_CAP = 4 << 20  # bytes read; a larger file is ignored
BENCH_NAME = "bench.json"


def _read(path: Path) -> dict[str, list[dict[str, Any]]]:
    models = read_record_file(path, TUNED_CAP, TUNED_VERSION, "models")
    return {
        k: [r for r in v if isinstance(r, dict)] for k, v in models.items() if isinstance(v, list)
    }


class TunedStore:
    """Records per model, one per (build, device): ``tuned.json`` (``bench`` keeps its own)."""

    def __init__(self, paths: Paths, name: str = TUNED_NAME) -> None:
        self.path = paths.home / name
        self._home = paths.home
        self._lock = paths.locks / f"{name.removesuffix('.json')}.lock"

    def records(self) -> dict[str, list[dict[str, Any]]]:
        return _read(self.path)

    def inputs_text(self) -> str:
        """For the generated config's inputs hash: a new record means a new config."""
        from ..digest import sha256_hex  # a generate's: a plan that hashes nothing loads none

        try:  # a FIFO in its place must not hang every command that generates
            return "tuned " + sha256_hex(read_regular(self.path, TUNED_CAP))
        except OSError:
            return "tuned none"

    def put(self, record: Record) -> None:
        """Add or replace the record for its (model, build, device): a locked, atomic write."""
        self.put_many([record])

    def put_many(self, records: Sequence[Record]) -> None:
        """:meth:`put` for several records in one atomic write: all of them or none."""
        from filelock import FileLock

        from .._fs import atomic_write_bytes

        self._lock.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(self._lock, timeout=30):
            models = _read(self.path)
            for record in records:
                raw = plain(record)
                kept = [
                    r
                    for r in models.get(raw["model"], [])
                    if (r.get("build_fp"), r.get("device")) != (raw["build_fp"], raw["device"])
                ]
                models[raw["model"]] = [*kept, raw][-16:]
            body = json.dumps({"version": TUNED_VERSION, "models": models}, indent=1)
            # never through a link: one to /dev/zero would have the device replaced
            atomic_write_bytes(self.path, body.encode(), no_links_below=self._home)


class BenchStore(TunedStore):
    """``bench.json`` beside ``tuned.json``: the same locked, atomic file of records."""

    def __init__(self, paths: Paths) -> None:
        super().__init__(paths, BENCH_NAME)
