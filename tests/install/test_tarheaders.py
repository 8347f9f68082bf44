"""The plain-header road (install/tarheaders.py) reads every header as tarfile's own parser
does: the same TarInfo, or the same error, on real headers of every format and type and on
random damage to them."""

from __future__ import annotations

import tarfile
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from backendmgr.install.tarheaders import PlainHeaders

_MISSING = object()


def _read(parse: type[tarfile.TarInfo], buf: bytes) -> tuple[str, Any]:
    try:
        info = parse.frombuf(buf, "utf-8", "surrogateescape")
    except Exception as exc:  # what tarfile raises is part of what must be the same
        return "error", (type(exc), str(exc))
    return "info", {k: getattr(info, k, _MISSING) for k in tarfile.TarInfo.__slots__}


def _header(name: str, kind: bytes, fmt: int, **fields: Any) -> bytes:
    info = tarfile.TarInfo(name)
    info.type = kind
    for key, value in fields.items():
        setattr(info, key, value)
    if kind in (tarfile.SYMTYPE, tarfile.LNKTYPE):
        info.linkname = fields.get("linkname", "target")
    return info.tobuf(fmt, "utf-8", "surrogateescape")


KINDS = [
    tarfile.REGTYPE,
    tarfile.AREGTYPE,
    tarfile.LNKTYPE,
    tarfile.SYMTYPE,
    tarfile.DIRTYPE,
    tarfile.CHRTYPE,
    tarfile.FIFOTYPE,
    tarfile.CONTTYPE,
]
FORMATS = [tarfile.USTAR_FORMAT, tarfile.GNU_FORMAT, tarfile.PAX_FORMAT]
NAMES = ["tool/bin/tool", "dir/", "a" * 99, "p/" * 60 + "long-name", "ünïcode/名前", "x"]


def _real_headers() -> list[bytes]:
    out = []
    for kind in KINDS:
        for fmt in FORMATS:
            for name in NAMES:
                for fields in ({}, {"size": 12345, "mode": 0o755, "mtime": 1 << 33}):
                    try:
                        buf = _header(name, kind, fmt, **fields)
                    except ValueError:
                        continue  # a name this format cannot hold
                    out += [buf[i : i + 512] for i in range(0, len(buf), 512)]
    return out


REAL = _real_headers()


def test_real_headers_of_every_format_and_type_read_the_same() -> None:
    assert len(REAL) > 200
    for buf in REAL:
        assert _read(PlainHeaders, buf) == _read(tarfile.TarInfo, buf)
    plain = [b for b in REAL if _read(PlainHeaders, b)[0] == "info"]
    assert len(plain) > 100  # the comparison covers what the short road reads


def test_the_end_and_short_blocks_read_the_same() -> None:
    for buf in (b"", b"\0" * 512, b"\0" * 100, REAL[0][:511]):
        assert _read(PlainHeaders, buf) == _read(tarfile.TarInfo, buf)


@settings(max_examples=400, deadline=None)
@given(
    st.sampled_from(REAL),
    st.lists(
        st.tuples(
            st.integers(0, 511),
            st.sampled_from([0, 0x20, 0x30, 0x37, 0x38, 0x2F, 0x80, 0xFF, 0x1C, 0x2B, 0x5F]),
        ),
        min_size=1,
        max_size=4,
    ),
    st.booleans(),
)
def test_damaged_headers_read_the_same(
    buf: bytes, changes: list[tuple[int, int]], fix_sum: bool
) -> None:
    """Bytes changed anywhere (numbers, types, the base-256 mark, whitespace tarfile strips),
    with the checksum left wrong or made right again."""
    out = bytearray(buf)
    for at, value in changes:
        out[at] = value
    if fix_sum:
        total = sum(out[:148]) + 256 + sum(out[156:])
        out[148:156] = b"%06o\0 " % (total % 0o1000000)
    data = bytes(out)
    assert _read(PlainHeaders, data) == _read(tarfile.TarInfo, data)
