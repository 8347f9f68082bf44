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
from ..digest import sha256_hex
from ..record import plain
from ..registry.kinds import classes_of, normalize_kind
from .entries import HASH_PREFIX

__all__ = [
    "EMITTER_VERSION",
    "MAX_OUTPUT",
    "Current",
    "Recorded",
    "edited_by_hand",
    "file_digest",
    "hand_edit",
    "header_hash",
    "inputs_hash",
    "keep_copy",
    "read_current",
    "read_record",
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
    # a path is any file name the system holds: one that is not UTF-8 comes as surrogates,
    # which "surrogatepass" encodes one to one (a plain encode() raises on them)
    for receipt in sorted(receipts):
        digest.update(b"\nreceipt " + receipt.encode("utf-8", "surrogatepass"))
    for path, size, mtime in sorted(files):
        digest.update(f"\nfile {path}\0{size}\0{mtime}".encode("utf-8", "surrogatepass"))
    digest.update(f"\ncard {card_gb!r}".encode())
    return digest.hexdigest()


_HEAD = 64 << 10  # the bytes of an output's start its header is looked for in
MAX_OUTPUT = 8 << 20
"""The largest output a rewrite reads whole (to say which entries changed); a bigger one (no
file backendmgr writes) is only hashed, streamed."""


def header_hash(raw: bytes) -> str | None:
    """The inputs hash in the header of an output whose bytes (or first bytes) are ``raw``."""
    for line in raw[:_HEAD].split(b"\n")[:5]:
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
    return home / "generated" / f"{sha256_hex(str(target).encode())[:24]}.sha256"


def record_written(record: Path, digest: str) -> None:
    """Keep ``digest`` (:func:`..digest.sha256_hex` of the bytes just written) as the record."""
    from .._fs import atomic_write_bytes

    atomic_write_bytes(record, digest.encode() + b"\n", no_links_below=record.parent)


class Recorded:
    """The record of what backendmgr last wrote to an output, as read before a rewrite: the
    digest it keeps, or why it confirms nothing, and what would stop it being rewritten."""

    __slots__ = ("digest", "refusal", "why")

    def __init__(self, digest: str | None, why: str = "", refusal: str | None = None) -> None:
        self.digest = digest  # the SHA-256 it keeps (None: it confirms nothing)
        self.why = why  # why it confirms nothing ("": it does)
        self.refusal = refusal  # the one line that refuses a rewrite, said before any write


def read_record(record: Path) -> Recorded:
    """The record at ``record`` (blocking). One that is missing or holds no digest confirms
    nothing, and is replaced by the next rewrite; a folder, a link (never followed: the file
    is ours), another kind of file, or one that cannot be read or replaced is refused by a
    rewrite before it writes anything, in a line that names it."""
    from .._fs import read_regular_stat

    try:
        raw, st = read_regular_stat(record, 128, follow=False)
    except FileNotFoundError:
        return Recorded(None, f"{record} is missing")
    except OSError as exc:
        what = _record_trouble(record, exc)
        return Recorded(None, what, f"{what}; {_REMOVE}")
    text = raw[:128].decode("ascii", "replace").strip()
    if not st.st_mode & 0o222 or not os.access(record, os.W_OK):  # as the write would say
        what = f"{record} is read-only"
        return Recorded(None, what, f"{what}; {_REMOVE}")
    if len(text) == 64 and all(c in "0123456789abcdef" for c in text):
        return Recorded(text)
    return Recorded(None, f"{record} holds no SHA-256")


_REMOVE = (
    "backendmgr keeps the digest of the llama-swap config it wrote there; nothing was "
    "changed: remove it and run the command again"
)


def _record_trouble(record: Path, exc: OSError) -> str:
    """What an open of the record that failed found there, said with its real path."""
    import errno

    if exc.errno == errno.ELOOP or record.is_symlink():
        return f"{record} is a symbolic link"
    if exc.errno == errno.ENOTDIR:
        return f"{record.parent} is not a folder"
    if exc.errno in (None, errno.EISDIR):  # opened, and not a regular file
        return f"{record} is {'a folder' if record.is_dir() else 'not a regular file'}"
    return f"{record} cannot be read ({exc.strerror})"


class Current:
    """What is at an output before a rewrite replaces it, read once (:func:`read_current`):
    whether it was edited by hand, its header and the entries it held all come from the
    same bytes."""

    __slots__ = ("digest", "exists", "header", "is_file", "raw")

    def __init__(
        self,
        exists: bool,
        is_file: bool = False,
        raw: bytes | None = None,
        digest: str | None = None,
        header: str | None = None,
    ) -> None:
        self.exists = exists  # anything at the path: a folder or a FIFO too
        self.is_file = is_file  # a regular file (through a link)
        self.raw = raw  # its bytes; None: unreadable, or larger than MAX_OUTPUT
        self.digest = digest  # the SHA-256 of its bytes (None: unreadable)
        self.header = header  # the inputs hash its header records (:func:`header_hash`)


def read_current(target: Path) -> Current:
    """The output at ``target`` as it is now (blocking, for a worker thread). A FIFO or a
    device in its place is never opened so as to wait, nor read."""
    from .._fs import open_regular

    if not target.is_file():
        return Current(target.exists())
    try:
        with open_regular(target) as fh:
            raw = fh.read(MAX_OUTPUT + 1)
            if len(raw) <= MAX_OUTPUT:
                return Current(True, True, raw, sha256_hex(raw), header_hash(raw))
            fh.seek(0)  # no file of ours: hashed to its end, streamed; its entries go unread
            digest = hashlib.file_digest(fh, "sha256").hexdigest()
            return Current(True, True, None, digest, header_hash(raw))
    except OSError:
        return Current(True, True)


def hand_edit(recorded: Recorded, current: Current, written: bytes | None = None) -> str | None:
    """The one check of whether an output is what backendmgr last wrote there: None when it is
    (or nothing is there); ``""`` when it is not (its bytes are not those the record keeps, or
    it is no regular file); else why it cannot be told (the record is missing, holds no digest
    or cannot be read), which counts as a hand edit too: a kept header proves nothing, as
    anyone may copy it. ``written``: the bytes backendmgr would write there now; a file that
    holds exactly those is its own, whatever the record says."""
    if not current.is_file:
        return "" if current.exists else None  # a folder or other odd thing in its place
    if written is not None and current.raw == written:
        return None
    if recorded.digest is None:
        return recorded.why
    return None if current.digest == recorded.digest else ""


def edited_by_hand(record: Path, target: Path, current: Current | None = None) -> bool:
    """True when ``target`` exists and cannot be taken as what backendmgr last wrote there
    (:func:`hand_edit`; ``current``: what is there, when the caller has read it already)."""
    now = read_current(target) if current is None else current
    return hand_edit(read_record(record), now) is not None


def keep_copy(target: Path) -> Path:
    """Copy ``target`` beside itself (``NAME.bak``; timestamped when that holds another copy,
    and numbered when that name is taken too: two hand edits kept in one second both stay).

    The copy is written to a temporary file and renamed (a stamped one linked, which never
    replaces another), so a ``.bak`` is never half a file. Its modules are loaded here: only
    a hand-edited file is copied, and an edit loads none.
    """
    import shutil
    import tempfile
    from datetime import UTC, datetime

    backup = target.with_name(target.name + ".bak")
    fd, tmp_name = tempfile.mkstemp(prefix=f".{backup.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        shutil.copyfile(target, tmp)
        shutil.copymode(target, tmp)
        if not backup.exists() or file_digest(backup) == file_digest(tmp):
            os.replace(tmp, backup)
            return backup
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        for n in range(1, 1000):
            backup = target.with_name(f"{target.name}.{stamp}{f'-{n}' if n > 1 else ''}.bak")
            try:
                os.link(tmp, backup)
            except FileExistsError:
                continue
            except OSError:  # a file system without hard links: a free name, renamed onto
                if backup.exists():
                    continue
                os.replace(tmp, backup)
            return backup
        raise FileExistsError(f"no free name for a copy of {target} in {target.parent}")
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
