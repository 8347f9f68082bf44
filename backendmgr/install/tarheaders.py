"""tarfile's header parser with a shorter road for the plain case, at the cost of 100 000
entries: a hostile archive of 100 001 empty files spends most of its refusal in tarfile's
``TarInfo.frombuf`` (one function call per field, two checksums over every header).

A plain ustar or GNU header of a file, hard link, symlink or folder, with octal numbers and a
checksum that matches the unsigned sum, is read here with one ``struct`` call; everything else
(pax and GNU long-name headers, sparse files, base-256 numbers, old V7 folders, a signed
checksum, a bad one, the end of the archive) goes to tarfile's own ``frombuf``, which also
raises its errors. The result is the same ``TarInfo`` either way (tests/install compare them on
random headers).
"""

from __future__ import annotations

import operator
import struct
import tarfile
import zlib
from typing import Self

__all__ = ["PlainHeaders"]

_FIELDS = struct.Struct("100s8s8s8s12s12s8sc100s8s32s32s8s8s155s12x")
_PLAIN_TYPES = frozenset((tarfile.REGTYPE, tarfile.LNKTYPE, tarfile.SYMTYPE, tarfile.DIRTYPE))
_NUMBER_LEADS = operator.itemgetter(100, 108, 116, 124, 136, 148, 329, 337)  # each number's
_BASE256 = frozenset((0o200, 0o377))  # first byte: these mark base-256 (tarfile reads them)


def _text(field: bytes, encoding: str, errors: str) -> str:
    end = field.find(b"\0")
    return (field if end < 0 else field[:end]).decode(encoding, errors)


def _unsigned_sum(buf: bytes | bytearray) -> int:
    """The header's checksum with its checksum field read as spaces. Adler-32's low half is
    1 + the byte sum modulo 65521: exact for 256 bytes (at most 65 280), in C."""
    low = ((zlib.adler32(buf[:256]) & 0xFFFF) - 1) + ((zlib.adler32(buf[256:]) & 0xFFFF) - 1)
    return low - sum(buf[148:156]) + 256


class PlainHeaders(tarfile.TarInfo):
    """``TarInfo`` whose ``frombuf`` reads plain headers itself (``tarfile.open(...,
    tarinfo=PlainHeaders)``)."""

    __slots__ = ()

    @classmethod
    def frombuf(cls, buf: bytes | bytearray, encoding: str, errors: str) -> Self:
        if (
            len(buf) != tarfile.BLOCKSIZE
            or buf[156:157] not in _PLAIN_TYPES
            or not _BASE256.isdisjoint(_NUMBER_LEADS(buf))
        ):
            return super().frombuf(buf, encoding, errors)
        (name, mode, uid, gid, size, mtime, chksum, kind, linkname, _magic, uname, gname,
         devmajor, devminor, prefix) = _FIELDS.unpack(buf)  # fmt: skip
        try:  # tarfile's ``nti`` for octal fields, inline (ValueError where it raises)
            numbers = [
                int(f.split(b"\0", 1)[0].decode("ascii").strip() or "0", 8)
                for f in (mode, uid, gid, size, mtime, chksum, devmajor, devminor)
            ]
        except ValueError:
            return super().frombuf(buf, encoding, errors)  # it says how the header is wrong
        if numbers[5] != _unsigned_sum(buf):
            return super().frombuf(buf, encoding, errors)  # a signed sum, or a bad one
        obj = cls()
        obj.name = _text(name, encoding, errors)
        obj.mode, obj.uid, obj.gid, obj.size, obj.mtime = numbers[:5]
        obj.chksum = numbers[5]
        obj.type = kind
        obj.linkname = _text(linkname, encoding, errors)
        obj.uname = _text(uname, encoding, errors)
        obj.gname = _text(gname, encoding, errors)
        obj.devmajor, obj.devminor = numbers[6], numbers[7]
        if kind == tarfile.DIRTYPE:
            obj.name = obj.name.rstrip("/")
        if prefix[:1] != b"\0":
            obj.name = _text(prefix, encoding, errors) + "/" + obj.name
        return obj
