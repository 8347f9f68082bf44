"""When the llama-swap config must be rewritten (SPEC §12.5): a hash over everything it reads.

The hash covers the settings (as data, so a comment edit in the config file changes nothing,
and upscale rows are left out because they never change the output), every build receipt,
every model file's path/size/mtime, the card size and the emitter version.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from pathlib import Path

from ..config.models import Settings
from ..registry.kinds import classes_of
from .document import HASH_PREFIX

__all__ = ["EMITTER_VERSION", "inputs_hash", "output_hash"]

EMITTER_VERSION = "2"  # 2: emitted by ruamel; files from 1 may hold injected keys


def inputs_hash(
    settings: Settings,
    receipts: Iterable[str],
    files: Iterable[tuple[str, int, int]],
    card_gb: float | None,
) -> str:
    relevant = settings.model_copy(
        update={"backends": [r for r in settings.backends if classes_of(r.kind) != {"upscale"}]}
    )
    digest = hashlib.sha256()
    digest.update(f"emitter {EMITTER_VERSION}\n".encode())
    digest.update(json.dumps(relevant.model_dump(mode="json"), sort_keys=True).encode())
    for receipt in sorted(receipts):
        digest.update(b"\nreceipt " + receipt.encode())
    for path, size, mtime in sorted(files):
        digest.update(f"\nfile {path}\0{size}\0{mtime}".encode())
    digest.update(f"\ncard {card_gb!r}".encode())
    return digest.hexdigest()


def output_hash(path: Path) -> str | None:
    """The inputs hash recorded in an existing output's header, if it has one."""
    try:
        with path.open(encoding="utf-8") as fh:
            for _ in range(5):
                line = fh.readline()
                if line.startswith(HASH_PREFIX):
                    return line[len(HASH_PREFIX) :].strip()
    except (OSError, UnicodeDecodeError):
        return None
    return None
