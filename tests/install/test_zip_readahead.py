"""A streamed zip reads its source a piece at a time, not once per header field (issue 34):
each read of a download's part file is a lock and two system calls."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

from backendmgr.install.zipstream import stream_zip


class Counting:
    """A source that counts its reads and hands out at most what was asked."""

    def __init__(self, data: bytes) -> None:
        self._fh = io.BytesIO(data)
        self.reads = 0

    def read(self, n: int = -1, /) -> bytes:
        self.reads += 1
        return self._fh.read(n)


def test_small_members_share_the_pieces_read_and_arrive_whole(tmp_path: Path) -> None:
    buf = io.BytesIO()
    members = {f"tool/include/f{i:03d}.h": (b"int x%d;\n" % i) * (i % 40 + 1) for i in range(300)}
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
        zf.writestr("tool/stored.bin", b"s" * 5000, compress_type=zipfile.ZIP_STORED)
    data = buf.getvalue()
    src = Counting(data)
    root = tmp_path / "root"
    root.mkdir()
    streamed = stream_zip(src, "t.zip", root, compressed=len(data), max_total=1 << 30)
    assert streamed is not None and streamed.complete
    assert src.reads <= len(data) // (64 << 10) + 3  # six reads per member before
    for name, content in members.items():
        assert (root / name).read_bytes() == content
    assert (root / "tool" / "stored.bin").read_bytes() == b"s" * 5000
