"""The parsed config beside the config file: an *input* cache for reads (issue 30).

Parsing the YAML round-trip (ruamel, the safety checks, line numbers for errors) and validating
it (pydantic) cost more than everything a read does with the result. So each time the config is
parsed or written, the settings it validated to are kept as JSON in ``.<config name>.parsed.json``
beside it, stamped with a format version, backendmgr's and the YAML parser's versions, the
config file's own bytes and its identity (device, inode). A read of that very file whose bytes
are the same reads those settings back strictly (:func:`..record.load`, no
pydantic) instead of parsing the YAML; any other file (edited by hand, by another version, half
written, or a snapshot that came beside a copy of the config) is parsed again and the snapshot
rewritten. Only the config's parse is cached: the GPU, ``PATH``, folders and clock stay live.

:func:`load_parsed` and :func:`save_parsed` are the same mechanism for any YAML file whose
parse a command needs again (the generated llama-swap config, to say which entries a rewrite
changed), kept wherever its owner chooses.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any

from .._fs import LinkRefused, atomic_write_bytes, read_regular_stat
from .._version import __version__

__all__ = [
    "FORMAT",
    "load_parsed",
    "load_snapshot",
    "save_parsed",
    "save_snapshot",
    "snapshot_path",
]

FORMAT = 5  # 5: an anchored boolean is kept as a boolean (4 kept it as 1)
# 2: the validated settings, not the parsed YAML; 3: stamped with the source's inode; 4: with the
# source's bytes themselves, not their SHA-256 (hashlib's OpenSSL was a fifth of a read's start)

MAX_BYTES = 32 << 20  # a bigger snapshot is ignored: the YAML is parsed instead


def snapshot_path(config: Path) -> Path:
    return config.with_name(f".{config.name}.parsed.json")


def _stamp(raw: bytes, parser: str, source: os.stat_result, digest: str | None) -> dict[str, Any]:
    """What a snapshot was made from: these bytes, by this parser, in this very file. The
    file's identity (device, inode) makes a snapshot that arrived with a copy of its source (a
    cloned dotfiles repository, an unpacked archive, a restored backup) no snapshot: the YAML a
    person reviewed decides, never a hidden file that came beside it. The bytes are kept as
    they are (each byte one character: JSON holds any), not as a digest: comparing a config's
    few kilobytes is exact and costs less than loading a hash function. ``digest``: their
    SHA-256 (hex) instead, for a source of many kilobytes read by a command that hashes it
    anyway and gives the digest (the generated llama-swap config: its bytes would be most of
    the snapshot)."""
    file = [source.st_dev, source.st_ino]
    made = {"sha256": digest} if digest is not None else {"source": raw.decode("latin-1")}
    return {"format": FORMAT, "backendmgr": __version__, "parser": parser, **made, "file": file}


def load_snapshot(config: Path, raw: bytes, parser: str) -> dict[str, Any] | None:
    """The settings (as plain data) validated from what ``parser`` (its name and version) made
    of exactly ``raw`` (the config's bytes), or ``None`` when no snapshot matches them."""
    return load_parsed(snapshot_path(config), config, raw, parser)


def save_snapshot(config: Path, raw: bytes, parser: str, document: dict[str, Any]) -> None:
    """Keep ``document`` (the settings ``raw`` validated to, as plain data) beside the config
    for the next read."""
    save_parsed(snapshot_path(config), config, raw, parser, document)


def load_parsed(
    where: Path, source: Path, raw: bytes, parser: str, *, digest: str | None = None
) -> dict[str, Any] | None:
    """The plain document kept at ``where`` for exactly ``raw`` (``source``'s bytes) as
    ``parser`` read them, or ``None`` when none matches them (``digest``: ``raw``'s SHA-256,
    for a document :func:`save_parsed` was given one for)."""
    try:  # a link, a FIFO or a device in its place is no snapshot of ours (nor waited on)
        data, st = read_regular_stat(where, MAX_BYTES, follow=False)
        made_from = os.stat(source)
        if st.st_mode & 0o077 & ~made_from.st_mode:
            return None  # the source was made private since: rewrite the snapshot as private
        if len(data) > MAX_BYTES:
            return None
        found = json.loads(data)
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(found, dict) or found.get("stamp") != _stamp(raw, parser, made_from, digest):
        return None
    document = found.get("document")
    return document if isinstance(document, dict) else None


def save_parsed(
    where: Path,
    source: Path,
    raw: bytes,
    parser: str,
    document: dict[str, Any],
    *,
    digest: str | None = None,
    plain: bool = False,
) -> None:
    """Keep ``document`` (what ``raw`` parsed to) at ``where``; replaced atomically, and a
    snapshot that cannot be written only costs the next read a parse. A document JSON does
    not give back equal (a number key, NaN, a date), or one over :data:`MAX_BYTES` (which
    no read would take), is not kept; ``plain``: the caller's document holds only string
    keys, lists and JSON's scalars (a safe load's, proved), so it is not read back to see.
    ``digest``: ``raw``'s SHA-256 (hex), stamped instead of the bytes (:func:`_stamp`). It holds
    what ``source`` holds, so nobody may read it who cannot read the source: it gets the
    source's mode."""
    with contextlib.suppress(OSError, ValueError, TypeError, RecursionError, LinkRefused):
        made_from = os.stat(source)
        stamp = _stamp(raw, parser, made_from, digest)
        kept = {"stamp": stamp, "document": document}
        body = json.dumps(kept, ensure_ascii=False, allow_nan=False)  # NaN is never equal
        data = body.encode("utf-8")
        if len(data) > MAX_BYTES:  # what no read takes: a quote is two bytes twice, say
            return
        if not plain and json.loads(body)["document"] != document:
            return
        if where.is_symlink():  # ours: a link in its place is never chmod-ed or written through
            return
        mode = (made_from.st_mode & 0o666) | 0o200  # the owner rewrites it
        try:
            os.close(os.open(where, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode))
        except FileExistsError:
            os.chmod(where, mode)
        # an input cache: a crash may leave it old, empty or gone, which reads as no
        # snapshot (its stamp holds the very bytes it was made from), so no fsync waits
        atomic_write_bytes(where, data, no_links_below=where.parent, durable=False)
