"""When the llama-swap config must be rewritten (SPEC §12.5): a hash over everything it reads.

The hash covers the settings (as data, so a comment edit in the config file changes nothing,
and upscale rows and kindless rows (llama-swap's) are left out because they never change the
output), every build receipt of a component that serves models,
every model file's path/size/mtime, the card size and the emitter version.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
from collections.abc import Iterable
from pathlib import Path

from ..config.models import Settings
from ..record import plain
from ..registry.kinds import classes_of, normalize_kind
from .entries import HASH_PREFIX

__all__ = [
    "EMITTER_VERSION",
    "edited_by_hand",
    "file_digest",
    "inputs_hash",
    "keep_copy",
    "output_hash",
    "record_written",
    "written_record",
]

EMITTER_VERSION = "3"  # 2: emitted by ruamel (files from 1 may hold injected keys); 3: one
# quoting rule for yaml.v3 and ${ escaped (files from 2 may hold flow lists llama-swap refuses)


def inputs_hash(
    settings: Settings,
    receipts: Iterable[str],
    files: Iterable[tuple[str, int, int]],
    card_gb: float | None,
) -> str:
    relevant = dataclasses.replace(
        settings,
        backends=[
            r
            for r in settings.backends
            if classes_of(r.kind) != {"upscale"} and normalize_kind(r.kind)
        ],
    )
    digest = hashlib.sha256()
    digest.update(f"emitter {EMITTER_VERSION}\n".encode())
    # a passthrough value JSON has no type for (a YAML date, a set) hashes as its type and repr
    text = json.dumps(plain(relevant), sort_keys=True, default=lambda v: f"{type(v)} {v!r}")
    digest.update(text.encode())
    for receipt in sorted(receipts):
        digest.update(b"\nreceipt " + receipt.encode())
    for path, size, mtime in sorted(files):
        digest.update(f"\nfile {path}\0{size}\0{mtime}".encode())
    digest.update(f"\ncard {card_gb!r}".encode())
    return digest.hexdigest()


def output_hash(path: Path) -> str | None:
    """The inputs hash recorded in an existing output's header, if it has one."""
    from .._fs import read_regular

    try:  # a FIFO in its place is no output of ours, and is not waited on
        head = read_regular(path, 64 << 10)[: 64 << 10]
    except OSError:
        return None
    for line in head.split(b"\n")[:5]:
        text = line.decode("utf-8", "replace")
        if text.startswith(HASH_PREFIX):
            return text[len(HASH_PREFIX) :].strip()
    return None


# --- hand edits (the generated file is the user's file too) ---------------------------------


def file_digest(path: Path) -> str | None:
    """SHA-256 of a file's bytes, streamed (any size), or None when it cannot be read."""
    from .._fs import open_regular

    try:
        with open_regular(path) as fh:  # never a FIFO, whose open would wait for a writer
            return hashlib.file_digest(fh, "sha256").hexdigest()
    except OSError:
        return None


def written_record(home: Path, target: Path) -> Path:
    """Where the digest of what backendmgr last wrote to ``target`` is kept (one per output)."""
    key = hashlib.sha256(str(target).encode()).hexdigest()[:24]
    return home / "generated" / f"{key}.sha256"


def record_written(record: Path, data: bytes) -> None:
    from .._fs import atomic_write_bytes

    digest = hashlib.sha256(data).hexdigest().encode() + b"\n"
    atomic_write_bytes(record, digest, no_links_below=record.parent)


def _recorded(record: Path) -> str | None:
    from .._fs import read_regular

    try:
        text = read_regular(record, 128)[:128].decode("ascii", "replace").strip()
    except OSError:
        return None
    return text if len(text) == 64 and all(c in "0123456789abcdef" for c in text) else None


def edited_by_hand(record: Path, target: Path) -> bool:
    """True when ``target`` exists and is not what backendmgr last wrote there.

    A file with no record is ours only if it carries our header (one written before records
    existed); a file without one was written by someone else and is theirs.
    """
    if not target.is_file():
        return target.exists()  # a folder or other odd thing where the output goes
    expected = _recorded(record)
    if expected is None:
        return output_hash(target) is None
    return file_digest(target) != expected


def keep_copy(target: Path) -> Path:
    """Copy ``target`` beside itself (``NAME.bak``; timestamped when that holds another copy).

    The copy is written to a temporary file and renamed, so a ``.bak`` is never half a file.
    Its modules are loaded here: only a hand-edited file is copied, and an edit loads none.
    """
    import shutil
    import tempfile
    from datetime import UTC, datetime

    backup = target.with_name(target.name + ".bak")
    if backup.exists() and file_digest(backup) != file_digest(target):
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        backup = target.with_name(f"{target.name}.{stamp}.bak")
    fd, tmp_name = tempfile.mkstemp(prefix=f".{backup.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        shutil.copyfile(target, tmp)
        shutil.copymode(target, tmp)
        os.replace(tmp, backup)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise
    return backup
