"""Where an archive install's time goes, stage by stage, for ``scripts/bench.py``: with
``BACKENDMGR_STAGE_TIMES`` naming a file, the install writes its stage times there (JSON,
seconds) so that a slower install names the stage that got slower.

Download, hashing and unpacking overlap; each figure is the time spent in that stage, in the
thread that does it (``unpack.wait`` is the unpack thread waiting for the download). Recording
costs two clock reads per piece or member, so it is always on; only the file is optional.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["ENV", "add", "reset", "save", "timed"]

ENV = "BACKENDMGR_STAGE_TIMES"

_times: dict[str, float] = {}


def reset() -> None:
    """A new install: its stages count from here (``began_at``: the wall clock, for the bench
    to tell the start-up before it from what follows the commit)."""
    _times.clear()
    _times["began_at"] = time.time()


def add(stage: str, seconds: float) -> None:
    """Count ``seconds`` to ``stage`` (each stage is written by one thread at a time)."""
    _times[stage] = _times.get(stage, 0.0) + seconds


@contextmanager
def timed(stage: str) -> Iterator[None]:
    started = time.perf_counter()
    try:
        yield
    finally:
        add(stage, time.perf_counter() - started)


def save() -> None:
    """Write the stage times where ``BACKENDMGR_STAGE_TIMES`` says; nothing when it is unset."""
    target = os.environ.get(ENV)
    if target:
        _times["saved_at"] = time.time()
        with open(target, "w", encoding="utf-8") as fh:
            json.dump(_times, fh)
