"""A ``.zip`` unpacked while it downloads, from its local headers, then held to its central
directory once the whole file is there and verified.

A zip's own index (the central directory) is at its end, so :func:`.extract.extract` can only
start once the download is over. Here each member is written as its local header and data
arrive; at the end the streamed tree is kept only if the central directory names exactly the
members streamed, in the same order, at the same offsets, with the same names, sizes,
compression and CRC-32: the same bytes that :func:`.extract.extract` would read. The central
directory then decides what only it says (modes, links, folders, skipped types), replaying the
same checks and limits. Anything else (a zip64 member, a data descriptor after stored data,
encryption, a place named twice, a refusal, a read error) gives up on the streamed tree: the
verified file is unpacked again by :func:`.extract.extract`, which gives the answer, errors
included. Past ``MAX_STREAMED`` members the stream stops and the rest is unpacked from the
verified file once the streamed ones agree.
"""

from __future__ import annotations

import os
import struct
import time
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from ..immutable import frozen
from . import stages
from .extract import (
    MAX_ENTRIES,
    MAX_LINK_TARGET,
    ExtractReport,
    _Budget,
    _mode,
    _write_file,
    zip_entry,
    zip_members,
)
from .inflate import IN_CHUNK, OUT_CHUNK, Source, _Inflate, fast_zlib
from .placing import Link, Places, link_target_ok, make_links, safe_relpath
from .writer import FileWriter, writing

__all__ = ["StreamedZip", "stream_zip"]

_LOCAL = b"PK\x03\x04"
_CENTRAL = (b"PK\x01\x02", b"PK\x05\x06", b"PK\x06\x06")  # a central entry, an end record
_DESCRIPTOR = b"PK\x07\x08"
_ZIP64 = 0xFFFFFFFF
# Members streamed at most, the rest unpacked from the verified file: the count is known only
# from the central directory, at the end, and 100 001 one-byte members would otherwise be
# 100 001 files made (a minute here) before the refusal that it gives at once.
MAX_STREAMED = 2048


class _NotStreamable(Exception):
    """Left to the unpack of the whole file."""


@frozen(slots=True)
class _Member:
    """One member as its local header and its data said."""

    offset: int
    raw_name: bytes
    rel: PurePosixPath | None
    method: int
    flags: int
    crc: int
    compressed: int
    size: int


@dataclass(repr=False, eq=False)
class StreamedZip:
    """What was unpacked into ``root`` as the download went, waiting for the central
    directory."""

    asset_name: str
    root: Path
    max_total: int
    members: list[_Member] = field(default_factory=list)
    complete: bool = False  # every member streamed (the central directory was reached)
    fresh: bool = True  # the root was empty when the stream began (placing.make_links)

    def finish(self, path: Path) -> ExtractReport | None:
        """The report when the verified file's central directory agrees with what was
        streamed (modes set, links made, the members past ``MAX_STREAMED`` unpacked from the
        file); None when the file must be unpacked again."""
        try:
            with zipfile.ZipFile(path) as zf, path.open("rb") as fh:
                infos = zf.infolist()
                streamed = infos[: len(self.members)]
                if (
                    len(infos) > MAX_ENTRIES
                    or len(infos) < len(self.members)
                    or (self.complete and len(infos) != len(self.members))
                    or not self._agrees(streamed)
                ):
                    return None
                report = ExtractReport()
                budget = _Budget(self.asset_name, path.stat().st_size, self.max_total)
                places = Places(self.root, self.asset_name)
                links: list[Link] = []
                self._apply(streamed, report, budget, places, links)
                with writing() as writer:
                    rest = infos[len(streamed) :]
                    places.drained_by(writer)
                    zip_members(zf, fh, rest, report, budget, places, links, writer)
            report.bytes += budget.total
            report.links += make_links(self.root, links, self.asset_name, fresh=self.fresh)
            return report
        except Exception:  # the unpack of the whole file says what is wrong, or that nothing is
            return None

    def _agrees(self, infos: list[zipfile.ZipInfo]) -> bool:
        places: set[PurePosixPath] = set()  # two names may clean to one: "a/./b" and "a/b"
        for info, member in zip(infos, self.members, strict=True):
            encoding = "utf-8" if info.flag_bits & 0x800 else "cp437"
            if (
                info.header_offset != member.offset
                or info.orig_filename.encode(encoding) != member.raw_name
                or safe_relpath(info.filename, self.asset_name) != member.rel
                or info.compress_type != member.method
                or info.flag_bits & 0x1
                or info.compress_size != member.compressed
                or info.file_size != member.size
                or member.crc != info.CRC
                or member.rel in places
            ):
                return False
            if member.rel is not None:
                places.add(member.rel)
        return True

    def _apply(
        self,
        infos: list[zipfile.ZipInfo],
        report: ExtractReport,
        budget: _Budget,
        places: Places,
        links: list[Link],
    ) -> None:
        """What ``extract``'s zip pass decides from the central directory, on files that are
        already written: the same checks and limits, in the same order."""
        name = self.asset_name
        for info in infos:
            if (entry := zip_entry(info, budget)) is None:
                continue
            rel, unix_mode, kind = entry
            dest = self.root.joinpath(*rel.parts)
            if kind == "dir":
                if not info.is_dir():
                    raise _NotStreamable("a folder streamed as a file")
                places.folder(rel)
                continue
            if kind == "link":
                with dest.open("rb") as fh:
                    data = fh.read(MAX_LINK_TARGET + 1)
                if len(data) > MAX_LINK_TARGET:
                    raise _NotStreamable("an oversized link target")
                target = data.decode("utf-8")
                link_target_ok(self.root, rel, target, name, info.filename)
                dest.unlink()
                links.append(Link(rel, target, hard=False))
                continue
            if kind == "other":
                dest.unlink()
                report.skipped.append(info.filename)
                continue
            budget.declare(info.filename, info.file_size, info.compress_size)
            budget.add(info.file_size)
            os.chmod(dest, _mode(unix_mode))
            report.files += 1


class _Ahead:
    """The archive's bytes in order, counted, with what an inflater read past its member's
    end handed back.

    The source is read :data:`IN_CHUNK` at a time and small reads (a member's 30-byte header,
    its name, a small member's data) are served from that piece: each read of the source is a
    lock and two system calls on the part file (issue 34: six of them per member before)."""

    def __init__(self, src: Source) -> None:
        self._src = src
        self._buf = b""
        self._at = 0  # what of ``_buf`` is handed out
        self.pos = 0

    def some(self, n: int) -> bytes:
        """The next bytes, at most ``n`` (none only at the end): what is left of the piece
        read ahead, else a read of ``n`` (a large one) or of a piece."""
        have = len(self._buf) - self._at
        if not have:
            if n >= IN_CHUNK:
                out = self._src.read(n)
                self.pos += len(out)
                return out
            self._buf, self._at = self._src.read(IN_CHUNK), 0
            have = len(self._buf)
        k = min(n, have)
        out = self._buf if k == len(self._buf) else self._buf[self._at : self._at + k]
        self._at += k
        self.pos += k
        return out

    def read(self, n: int) -> bytes:
        """``n`` bytes, fewer only at the end."""
        out = self.some(n)
        if 0 < len(out) < n:
            parts, got = [out], len(out)
            while got < n and (more := self.some(n - got)):
                parts.append(more)
                got += len(more)
            out = b"".join(parts)
        return out

    def exactly(self, n: int) -> bytes:
        out = self.read(n)
        if len(out) < n:
            raise _NotStreamable("the archive ends inside a header")
        return out

    def skip(self, n: int) -> None:
        """Drop the next ``n`` bytes, a bounded piece at a time."""
        while n > 0:
            got = len(self.some(min(n, IN_CHUNK)))
            if not got:
                raise _NotStreamable("the archive ends inside a member")
            n -= got

    def unread(self, data: bytes) -> None:
        self._buf, self._at = data + self._buf[self._at :], 0
        self.pos -= len(data)


def stream_zip(
    src: Source, asset_name: str, root: Path, *, compressed: int, max_total: int
) -> StreamedZip | None:
    """Unpack the members of the zip read from ``src`` into ``root`` as they arrive; what was
    streamed, or None when the streamed tree cannot be kept (the caller then unpacks the
    verified file). ``compressed`` is the size the release states."""
    streamed = StreamedZip(asset_name, root, max_total)
    budget = _Budget(asset_name, compressed, max_total)
    places = Places(root, asset_name)
    streamed.fresh = places.fresh
    reader = _Ahead(src)
    try:
        with writing() as writer:  # the files are written by a second thread
            places.drained_by(writer)
            while (member := _next(reader, asset_name, places, budget, writer)) is not None:
                streamed.members.append(member)
                if len(streamed.members) >= MAX_STREAMED:
                    break  # the rest is unpacked from the verified file
            else:
                streamed.complete = True
    except Exception:  # refusals included: the central directory's unpack gives the answer
        return None
    return streamed


def _next(
    reader: _Ahead, name: str, places: Places, budget: _Budget, writer: FileWriter
) -> _Member | None:
    """Stream one member into place; None once the central directory begins."""
    offset = reader.pos
    signature = reader.exactly(4)
    if signature in _CENTRAL:
        return None
    if signature != _LOCAL:
        raise _NotStreamable("no local header where one must be")
    head = reader.exactly(26)
    flags, method, crc, size_c, size, name_len, extra_len = struct.unpack("<2xHH4xIIIHH", head)
    raw_name = reader.exactly(name_len)
    reader.exactly(extra_len)
    if flags & 0x1 or method not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
        raise _NotStreamable("encrypted, or compressed in a way left to zipfile")
    if _ZIP64 in (size_c, size):
        raise _NotStreamable("a zip64 member")
    described = bool(flags & 0x8)
    if described and method == zipfile.ZIP_STORED:
        raise _NotStreamable("stored data of a size stated only after it")
    text = raw_name.decode("utf-8" if flags & 0x800 else "cp437")
    budget.entry()
    rel = safe_relpath(text, name)
    if text.endswith("/"):  # a folder: its data, if any, is never read (as by zipfile)
        if described:
            raise _NotStreamable("a folder whose data has no stated end")
        reader.skip(size_c)
        if rel is not None:
            places.folder(rel)
        return _Member(offset, raw_name, rel, method, flags, crc, size_c, size)
    if rel is None:
        raise _NotStreamable("data for the archive's root")
    if not described:
        budget.declare(text, size, size_c)
    dest = places.file(rel)
    start = reader.pos
    sums = [0, 0]  # CRC-32 and size of what was written
    if method == zipfile.ZIP_DEFLATED:
        data = _inflated(reader, None if described else size_c, sums)
    else:
        data = _stored(reader, size_c, sums)
    declared = budget.limit if described else size
    _write_file(data, dest, declared, budget, text, 0o600, writer)
    used = reader.pos - start
    if described:
        crc, size_c, size = _descriptor(reader)
    if (sums[0], sums[1], used) != (crc, size, size_c):
        raise _NotStreamable("a member that is not what its header says")
    return _Member(offset, raw_name, rel, method, flags, crc, size_c, size)


def _descriptor(reader: _Ahead) -> tuple[int, int, int]:
    """A data descriptor's CRC-32, compressed and uncompressed sizes (its signature optional)."""
    first = reader.exactly(4)
    if first == _DESCRIPTOR:
        first = reader.exactly(4)
    crc = struct.unpack("<I", first)[0]
    size_c, size = struct.unpack("<II", reader.exactly(8))
    return crc, size_c, size


def _stored(reader: _Ahead, size: int, sums: list[int]) -> Iterator[bytes]:
    left = size
    while left:
        piece = reader.some(min(OUT_CHUNK, left))
        if not piece:
            raise _NotStreamable("the archive ends inside a member")
        left -= len(piece)
        sums[0] = fast_zlib.crc32(piece, sums[0])
        sums[1] += len(piece)
        yield piece


def _inflated(reader: _Ahead, size_c: int | None, sums: list[int]) -> Iterator[bytes]:
    """The member's deflate stream inflated in bounded pieces; what was read past its end
    goes back to ``reader``. ``size_c`` None: its size is known only from its end."""
    decoder = _Inflate(-15)
    left = size_c
    while not decoder.eof:
        data = b""
        if decoder.needs_input:
            want = IN_CHUNK if left is None else min(IN_CHUNK, left)
            data = reader.some(want) if want else b""
            if not data:
                raise _NotStreamable("a member ends before its end marker")
            if left is not None:
                left -= len(data)
        started = time.perf_counter()
        out = decoder.decompress(data, OUT_CHUNK)
        sums[0] = fast_zlib.crc32(out, sums[0])
        stages.add("inflate", time.perf_counter() - started)
        if out:
            sums[1] += len(out)
            yield out
    if left is None:
        reader.unread(decoder.unused_data)  # the data descriptor, then the next header
    else:
        reader.skip(left)  # stated as this member's, after its deflate stream: never read
