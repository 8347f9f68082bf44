"""Decompress an archive's stream in bounded pieces, for tarfile to read as a plain tar.

tarfile's own ``r|gz`` / ``r|xz`` reader decompresses each read in one call without an output
limit and keeps what it has not handed out in one buffer, copied again on every 512-byte header
read: a compressible archive costs quadratic time and memory without bound. Here no call yields
more than ``OUT_CHUNK`` bytes, whatever the compression ratio, and ``consumed`` counts the
compressed bytes taken so far, so that the caller can refuse a bomb as it unfolds.
"""

from __future__ import annotations

import bz2
import io
import lzma
import struct
import sys
import time
import zipfile
import zlib
from collections.abc import Iterator
from functools import cache
from types import ModuleType
from typing import IO, BinaryIO, Protocol, cast

from . import stages


def _fastest_zlib() -> ModuleType:
    """ISA-L inflates deflate several times faster than zlib (or zlib-ng); the standard
    library where its wheel is missing."""
    try:
        from isal import isal_zlib
    except ImportError:  # pragma: no cover - a platform without its wheel
        return zlib
    return isal_zlib


fast_zlib = _fastest_zlib()


@cache
def keep_pieces_in_heap() -> None:
    """Have glibc's allocator keep the unpack's pieces (up to ``OUT_CHUNK``) in its heaps and
    keep up to 8 MiB free there, once per process. By default a piece of 128 KiB or more is a
    mapping of its own or, once the allocator adapts, heap memory handed back to the system as
    soon as it is free; each new piece then starts on fresh pages the kernel must zero: a .zip
    of the bench's 87 MiB tree took 34 000 page faults against 8 500 with this (13 % of the
    install's CPU here). The memory kept is bounded (8 MiB free per heap); elsewhere than glibc,
    nothing changes."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # pragma: no cover - a C library without it
        return
    mallopt(M_MMAP_THRESHOLD, 2 * OUT_CHUNK)
    mallopt(M_TRIM_THRESHOLD, 8 * OUT_CHUNK)


__all__ = [
    "DATA_ERRORS",
    "Served",
    "Source",
    "Unpacked",
    "fast_zlib",
    "keep_pieces_in_heap",
    "zip_member",
]

IN_CHUNK = 256 << 10
OUT_CHUNK = 1 << 20
M_TRIM_THRESHOLD = -1  # mallopt(3)'s parameters
M_MMAP_THRESHOLD = -3
MAX_READ = 16 << 20  # a pax header of this size is no release's

GZIP_MAGIC = b"\x1f\x8b"
XZ_MAGIC = b"\xfd7zXZ\x00"
BZ2_MAGIC = b"BZh"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"

# What the decompressors raise on bytes that are not what they claim (besides EOFError)
DATA_ERRORS: tuple[type[BaseException], ...] = (zlib.error, fast_zlib.error, lzma.LZMAError)


class Source(Protocol):
    def read(self, n: int = -1, /) -> bytes: ...


class _Inflate:
    """zlib's (or ISA-L's) decompressobj behind the interface of lzma's and bz2's
    decompressors (bounded output, input kept inside): zlib's hands back the input it did not
    use (``unconsumed_tail``) instead of keeping it."""

    def __init__(self, wbits: int) -> None:
        self._d = fast_zlib.decompressobj(wbits)
        self._tail = b""

    @property
    def eof(self) -> bool:
        return bool(self._d.eof)

    @property
    def needs_input(self) -> bool:
        return not self._tail and not self._d.eof

    @property
    def unused_data(self) -> bytes:
        return bytes(self._d.unused_data)

    def decompress(self, data: bytes, max_length: int = -1) -> bytes:
        out = self._d.decompress(self._tail + data if self._tail else data, max_length)
        self._tail = bytes(self._d.unconsumed_tail)
        return bytes(out)


_Decoder = _Inflate | lzma.LZMADecompressor | bz2.BZ2Decompressor


def _decoder(head: bytes) -> _Decoder | None:
    if head.startswith(GZIP_MAGIC):
        return _Inflate(31)  # a gzip header and trailer, checked
    if head.startswith(XZ_MAGIC):
        return lzma.LZMADecompressor(lzma.FORMAT_XZ)
    if head.startswith(BZ2_MAGIC):
        return bz2.BZ2Decompressor()
    return None


class Served:
    """A read-only file over bounded pieces, read front to back without copying them whole.

    ``read(n)`` returns exactly ``n`` bytes (fewer only at the end), as a buffered file does:
    tarfile reads headers through it. ``views(n)`` hands out the next ``n`` bytes as slices of
    the pieces themselves, for the data to go to a file with no copy in Python. ``tell`` and a
    forward ``seek`` (which skips) let tarfile read it as an uncompressed tar in ``r:`` mode,
    without its stream layer, which copies every byte through a 10 KiB buffer."""

    def __init__(self, pieces: Iterator[bytes]) -> None:
        self._piece = memoryview(b"")
        self._at = 0  # position in the current piece
        self._pos = 0  # position in the whole stream
        self._pieces = pieces

    def _fill(self) -> bool:
        """Make the current piece non-empty; False at the end."""
        while self._at >= len(self._piece):
            piece = next(self._pieces, b"")
            if not piece:
                return False
            self._piece, self._at = memoryview(piece), 0
        return True

    def views(self, n: int) -> Iterator[memoryview]:
        """The next ``n`` bytes (fewer only at the end) as slices of the pieces."""
        while n > 0 and self._fill():
            end = min(self._at + n, len(self._piece))
            view = self._piece[self._at : end]
            n -= end - self._at
            self._pos += end - self._at
            self._at = end
            yield view

    def read(self, n: int = -1, /) -> bytes:
        if n < 0 or n > MAX_READ:  # tarfile reads a pax or GNU header whole, at its stated size
            raise ValueError(f"a header of {n} bytes: no archive needs more than {MAX_READ}")
        if self._fill() and self._at + n <= len(self._piece):  # a header: within one piece
            out = self._piece[self._at : self._at + n].tobytes()
            self._at += n
            self._pos += n
            return out
        return b"".join(self.views(n))

    def tell(self) -> int:
        return self._pos

    def seek(self, pos: int, whence: int = io.SEEK_SET, /) -> int:
        """Forward only: what lies between is decompressed and dropped."""
        if whence == io.SEEK_CUR:
            pos += self._pos
        elif whence != io.SEEK_SET:
            raise io.UnsupportedOperation("a stream seeks only from its start")
        if pos < self._pos:
            raise io.UnsupportedOperation("a stream cannot seek backwards")
        for _ in self.views(pos - self._pos):
            pass
        return self._pos


class Unpacked(Served):
    """A gzip, xz, bzip2 or zstd stream (or an uncompressed one), decompressed for tarfile's
    stream mode."""

    def __init__(self, src: Source) -> None:
        self._src = src
        self.consumed = 0  # compressed bytes taken from ``src``
        super().__init__(self._decode())

    def _take(self, n: int = IN_CHUNK) -> bytes:
        data = self._src.read(n)
        self.consumed += len(data)
        return data

    def _decode(self) -> Iterator[bytes]:
        head = self._take()
        if head.startswith(ZSTD_MAGIC):
            yield from self._zstd(head)
            return
        decoder = _decoder(head)
        if decoder is None:  # not compressed: tarfile judges the bytes
            while head:
                yield head
                head = self._take()
            return
        magic = head[:3]
        data = head
        while True:
            while not decoder.eof:
                if decoder.needs_input and not data:
                    data = self._take()
                    if not data:
                        raise EOFError("the compressed stream ends before its end marker")
                started = time.perf_counter()
                out = decoder.decompress(data, OUT_CHUNK)
                stages.add("inflate", time.perf_counter() - started)
                if out:
                    yield out
                data = b""
            # Concatenated streams are one stream (gzip -c a b); anything else after is ignored.
            data = decoder.unused_data
            if len(data) < len(magic):
                data += self._take()
            if not data.startswith(magic) or (decoder := _decoder(data)) is None:
                return

    def _zstd(self, head: bytes) -> Iterator[bytes]:
        import zstandard

        reader = zstandard.ZstdDecompressor().stream_reader(
            cast(IO[bytes], _Prefixed(head, self)), read_size=IN_CHUNK, read_across_frames=True
        )
        while True:
            with stages.timed("inflate"):
                piece = reader.read(OUT_CHUNK)
            if not piece:
                return
            yield piece


class _Prefixed:
    """The bytes already taken to sniff the format, then the rest of the source."""

    def __init__(self, head: bytes, owner: Unpacked) -> None:
        self._head = head
        self._owner = owner

    def read(self, n: int = -1, /) -> bytes:
        if self._head:
            out, self._head = self._head, b""
            return out
        return self._owner._take(n if n > 0 else IN_CHUNK)


def zip_member(fh: BinaryIO, info: zipfile.ZipInfo) -> Served:
    """A deflated zip member's data, inflated in bounded pieces and checked against its CRC-32
    and size as zipfile checks them (zipfile inflates and sums with the standard zlib)."""
    fh.seek(info.header_offset)
    head = fh.read(30)
    if len(head) < 30 or not head.startswith(b"PK\x03\x04"):
        raise zipfile.BadZipFile(f"{info.filename!r}: bad local file header")
    flags, name_len, extra_len = struct.unpack("<H18xHH", head[6:30])
    name = fh.read(name_len)
    if name != info.orig_filename.encode("utf-8" if flags & 0x800 else "cp437"):
        raise zipfile.BadZipFile(f"{info.filename!r}: its local header names another file")
    fh.seek(extra_len, io.SEEK_CUR)
    return Served(_inflated(fh, info))


def _inflated(fh: BinaryIO, info: zipfile.ZipInfo) -> Iterator[bytes]:
    decoder = _Inflate(-15)  # raw deflate
    left = info.compress_size
    crc = size = 0
    while not decoder.eof:
        data = b""
        if decoder.needs_input:
            data = fh.read(min(IN_CHUNK, left))
            if not data:
                raise EOFError(f"{info.filename!r} ends before its end marker")
            left -= len(data)
        with stages.timed("inflate"):
            out = decoder.decompress(data, OUT_CHUNK)
            crc = fast_zlib.crc32(out, crc)
        if out:
            size += len(out)
            yield out
    if crc != info.CRC or size != info.file_size:
        raise zipfile.BadZipFile(f"Bad CRC-32 or size for file {info.filename!r}")
