"""A .zip unpacked from its local headers as it downloads is kept only when its central
directory says the same: then the tree is the one the unpack of the whole file makes; otherwise
(or for anything unusual) the streamed tree is given up and the whole file decides."""

from __future__ import annotations

import io
import os
import stat
import zipfile
from pathlib import Path

import pytest

from backendmgr.install.extract import ExtractReport, extract
from backendmgr.install.zipstream import StreamedZip, stream_zip
from backendmgr.record import plain
from tests.support.archives import Entry, make_zip

ENTRIES = [
    Entry("tool/", kind="dir"),
    Entry("tool/bin/tool", b"#!/bin/sh\necho 1\n" * 50, mode=0o755),
    Entry("tool/lib/libx.so.1", os.urandom(300_000) + bytes(200_000)),
    Entry("tool/lib/libx.so", kind="symlink", target="libx.so.1"),
    Entry("tool/share/empty", b""),
    Entry("tool/share/doc.txt", b"plain text " * 4000, mode=0o600),
]


def _shape(root: Path) -> dict[str, tuple[str, object]]:
    out: dict[str, tuple[str, object]] = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(folder) / name
            mode = os.lstat(path).st_mode
            rel = str(path.relative_to(root))
            if stat.S_ISLNK(mode):
                out[rel] = ("link", os.readlink(path))
            elif stat.S_ISDIR(mode):
                out[rel] = ("dir", stat.S_IMODE(mode))
            else:
                out[rel] = ("file", (stat.S_IMODE(mode), path.read_bytes()))
    return out


def _streamed(path: Path, root: Path) -> StreamedZip | None:
    root.mkdir()
    with path.open("rb") as fh:  # read front to back, as the download's follower is
        return stream_zip(fh, path.name, root, compressed=path.stat().st_size, max_total=1 << 30)


def _whole(path: Path, root: Path) -> ExtractReport:
    root.mkdir()
    return extract(path, path.name, root, exe_name="tool")


def _described(entries: list[Entry]) -> bytes:
    """The zip a writer makes on a pipe: sizes and CRCs in data descriptors after the data."""

    class Pipe(io.RawIOBase):
        def __init__(self) -> None:
            self.data = bytearray()

        def writable(self) -> bool:
            return True

        def write(self, b: bytes) -> int:  # type: ignore[override]
            self.data += b
            return len(b)

    pipe = Pipe()
    with zipfile.ZipFile(pipe, "w", zipfile.ZIP_DEFLATED) as zf:
        for e in entries:
            info = zipfile.ZipInfo(e.name)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = (stat.S_IFREG | e.mode) << 16
            zf.writestr(info, e.data)
    return bytes(pipe.data)


@pytest.mark.parametrize("kind", ["seekable", "data-descriptors", "stored"])
def test_a_streamed_zip_is_the_tree_the_whole_file_gives(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "tool-linux-x64.zip"
    files = [e for e in ENTRIES if e.kind == "file"]
    if kind == "data-descriptors":
        path.write_bytes(_described(files))
    elif kind == "stored":
        with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as zf:
            for e in files:
                info = zipfile.ZipInfo(e.name)
                info.external_attr = (stat.S_IFREG | e.mode) << 16
                zf.writestr(info, e.data)
    else:
        path.write_bytes(make_zip(ENTRIES))
    described = kind == "data-descriptors"
    assert all(bool(i.flag_bits & 0x8) == described for i in zipfile.ZipFile(path).infolist())
    streamed = _streamed(path, tmp_path / "a")
    assert streamed is not None
    report = streamed.finish(path)
    whole = _whole(path, tmp_path / "b")
    assert plain(report) == plain(whole)
    assert _shape(tmp_path / "a") == _shape(tmp_path / "b")
    assert len(_shape(tmp_path / "a")) >= len(files)


def _patch_central(data: bytes, name: bytes, at: int, value: bytes) -> bytes:
    """``value`` at byte ``at`` of the central directory entry of ``name``."""
    entry = data.index(b"PK\x01\x02")
    while data[entry + 46 : entry + 46 + len(name)] != name:
        entry = data.index(b"PK\x01\x02", entry + 4)
    out = bytearray(data)
    out[entry + at : entry + at + len(value)] = value
    return bytes(out)


@pytest.mark.parametrize(
    ("field", "at", "value"),
    [
        ("name", 46 + len(b"tool/bin/"), b"l"),  # tool/bin/tool -> tool/bin/lool
        ("crc", 16, b"\0\0\0\0"),
        ("size", 24, b"\1\0\0\0"),
    ],
)
def test_a_central_directory_that_disagrees_gives_up_the_streamed_tree(
    tmp_path: Path, field: str, at: int, value: bytes
) -> None:
    path = tmp_path / "tool-linux-x64.zip"
    path.write_bytes(_patch_central(make_zip(ENTRIES), b"tool/bin/tool", at, value))
    streamed = _streamed(path, tmp_path / "a")
    assert streamed is not None  # the local headers and data are sound
    assert streamed.finish(path) is None, field  # the whole file decides


def test_what_the_local_headers_refuse_is_left_to_the_whole_file(tmp_path: Path) -> None:
    """A bomb, a path out of the root, an encrypted member: never kept from the stream,
    whatever it did; the whole file's unpack refuses them with its own words."""
    bomb = tmp_path / "bomb.zip"
    bomb.write_bytes(make_zip([Entry("tool/zeros", bytes(8 << 20))]))  # about 1000:1
    assert _streamed(bomb, tmp_path / "a") is None
    escape = tmp_path / "escape.zip"
    escape.write_bytes(make_zip([Entry("../evil", b"x")]))
    assert _streamed(escape, tmp_path / "b") is None
    assert not (tmp_path / "evil").exists()
    locked = bytearray(make_zip([Entry("tool/bin/tool", b"x" * 100)]))
    locked[6] |= 0x1  # the local header's "encrypted" flag
    encrypted = tmp_path / "encrypted.zip"
    encrypted.write_bytes(bytes(locked))
    assert _streamed(encrypted, tmp_path / "c") is None


def test_a_link_streamed_as_its_target_text_becomes_the_link(tmp_path: Path) -> None:
    path = tmp_path / "tool-linux-x64.zip"
    path.write_bytes(make_zip(ENTRIES))
    streamed = _streamed(path, tmp_path / "a")
    assert streamed is not None
    link = tmp_path / "a" / "tool" / "lib" / "libx.so"
    assert link.read_bytes() == b"libx.so.1" and not link.is_symlink()  # before the check
    report = streamed.finish(path)
    assert report is not None and report.links == 1
    assert os.readlink(link) == "libx.so.1"


def test_past_its_member_cap_the_rest_comes_from_the_whole_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The count is known only at the end: the stream stops at its cap, and the rest is
    unpacked from the verified file; the tree is the same."""
    monkeypatch.setattr("backendmgr.install.zipstream.MAX_STREAMED", 20)
    path = tmp_path / "many.zip"
    entries = [Entry(f"tool/f{i:03}", b"x" * i, mode=0o700 if i % 2 else 0o644) for i in range(99)]
    path.write_bytes(make_zip([*entries, Entry("tool/l", kind="symlink", target="f001")]))
    streamed = _streamed(path, tmp_path / "a")
    assert streamed is not None and not streamed.complete
    assert len(list((tmp_path / "a" / "tool").iterdir())) == 20
    assert plain(streamed.finish(path)) == plain(_whole(path, tmp_path / "b"))
    assert _shape(tmp_path / "a") == _shape(tmp_path / "b")


def test_more_entries_than_allowed_make_no_more_files_than_the_cap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """100 001 tiny members must not become 100 001 files before the central directory
    refuses them: the stream stops at its cap, and the count is refused by the whole file."""
    monkeypatch.setattr("backendmgr.install.zipstream.MAX_STREAMED", 20)
    monkeypatch.setattr("backendmgr.install.zipstream.MAX_ENTRIES", 50)
    path = tmp_path / "many.zip"
    path.write_bytes(make_zip([Entry(f"tool/f{i}", b"x") for i in range(100)]))
    streamed = _streamed(path, tmp_path / "a")
    assert streamed is not None and streamed.finish(path) is None
    assert len(list((tmp_path / "a" / "tool").iterdir())) == 20
