from __future__ import annotations

import os
import zipfile
import zlib
from pathlib import Path

import pytest

from backendmgr.errors import UnsafeArchive
from backendmgr.install import inflate
from backendmgr.install.extract import extract, find_executable
from tests.support import Entry, llama_entries, make_tar, make_tar_zst, make_zip, tree


def unpack(tmp_path: Path, name: str, data: bytes) -> Path:
    archive = tmp_path / "dl" / name
    archive.parent.mkdir(parents=True, exist_ok=True)
    archive.write_bytes(data)
    staging = tmp_path / "box" / "staging"
    staging.mkdir(parents=True)
    extract(archive, name, staging, exe_name="llama-server")
    return staging


@pytest.mark.parametrize(
    ("name", "builder"),
    [
        ("a.tar.gz", lambda e: make_tar(e, "gz")),
        ("a.tgz", lambda e: make_tar(e, "gz")),
        ("a.tar.xz", lambda e: make_tar(e, "xz")),
        ("a.tar.zst", make_tar_zst),
        ("a.tar", lambda e: make_tar(e, "")),  # uncompressed: copied by range in the kernel
        ("a.zip", make_zip),
    ],
)
def test_formats_with_library_symlink_chain(tmp_path: Path, name: str, builder: object) -> None:
    staging = unpack(tmp_path, name, builder(llama_entries("b1")))  # type: ignore[operator]
    bin_dir = staging / "build" / "bin"
    assert os.readlink(bin_dir / "libggml.so") == "libggml.so.0"
    assert os.readlink(bin_dir / "libggml.so.0") == "libggml.so.0.9.4"
    assert (bin_dir / "libggml.so").resolve() == (bin_dir / "libggml.so.0.9.4").resolve()
    assert (bin_dir / "libggml.so").read_bytes().startswith(b"\x7fELF")
    exe = find_executable(staging, "llama-server")
    assert exe == bin_dir / "llama-server"
    assert os.stat(exe).st_mode & 0o111


def test_bare_asset_becomes_the_executable(tmp_path: Path) -> None:
    staging = unpack(tmp_path, "llama-server-linux", b"#!/bin/sh\necho hi\n")
    assert (staging / "llama-server").read_bytes() == b"#!/bin/sh\necho hi\n"
    assert os.stat(staging / "llama-server").st_mode & 0o755 == 0o755


@pytest.mark.parametrize(
    ("name", "builder"),
    [
        ("a.tar.gz", lambda e: make_tar(e, "gz")),
        ("a.tar", lambda e: make_tar(e, "")),  # copied by range: its own chmod
        ("a.zip", make_zip),
    ],
)
def test_no_member_is_installed_writable_by_group_or_others(
    tmp_path: Path, name: str, builder: object
) -> None:
    """An archive's 0777/0666/setuid modes: the owner reads and writes, nobody else writes
    (or the binary llama-swap runs is anyone's to replace), no special bits."""
    entries = [
        Entry("t/llama-server", b"#!/bin/sh\n", mode=0o777),
        Entry("t/lib.so", b"\x7fELF", mode=0o666),
        Entry("t/suid", b"x", mode=0o4777),
        Entry("t/readonly", b"x", mode=0o444),
    ]
    staging = unpack(tmp_path, name, builder(entries))  # type: ignore[operator]
    modes = {p.name: os.stat(p).st_mode & 0o7777 for p in (staging / "t").iterdir()}
    assert modes == {"llama-server": 0o755, "lib.so": 0o644, "suid": 0o755, "readonly": 0o644}


def test_find_executable_is_case_insensitive_and_lexical(tmp_path: Path) -> None:
    (tmp_path / "b").mkdir()
    (tmp_path / "a").mkdir()
    (tmp_path / "b" / "llama-server").write_text("b")
    (tmp_path / "a" / "LLAMA-SERVER").write_text("a")
    assert find_executable(tmp_path, "llama-server") == tmp_path / "a" / "LLAMA-SERVER"
    assert find_executable(tmp_path, "nope") is None


def test_hard_link_inside_is_made(tmp_path: Path) -> None:
    entries = [
        Entry("bin/real", b"data", mode=0o755),
        Entry("bin/alias", kind="hardlink", target="bin/real"),
    ]
    staging = unpack(tmp_path, "h.tar.gz", make_tar(entries))
    assert (staging / "bin" / "alias").read_bytes() == b"data"


@pytest.mark.parametrize(
    ("name", "entries"),
    [
        (  # tar lists the regular file last: tar leaves it, links made last would not
            "hard.tar.gz",
            [
                Entry("t/evil", b"#!/bin/sh\necho EVIL\n", mode=0o755),
                Entry("t/llama-server", kind="hardlink", target="t/evil"),
                Entry("t/llama-server", b"#!/bin/sh\necho ok\n", mode=0o755),
            ],
        ),
        (
            "sym.tar.gz",
            [
                Entry("t/evil", b"#!/bin/sh\necho EVIL\n", mode=0o755),
                Entry("t/llama-server", kind="symlink", target="evil"),
                Entry("t/llama-server", b"#!/bin/sh\necho ok\n", mode=0o755),
            ],
        ),
        (
            "folder.zip",
            [Entry("t/lib/libggml.so", b"\x7fELF"), Entry("t/lib", kind="symlink", target=".")],
        ),
    ],
)
def test_a_name_both_link_and_another_entry_is_refused(
    tmp_path: Path, name: str, entries: list[Entry]
) -> None:
    """Links are made last (nothing is written through one), so a name that is also a file or
    a folder cannot come out as tar would leave it: refused, as a file-and-folder name is."""
    builder = make_zip if name.endswith(".zip") else make_tar
    with pytest.raises(UnsafeArchive, match="is both a link and another entry"):
        unpack(tmp_path, name, builder(entries))


def test_a_link_listed_twice_alike_is_one_link(tmp_path: Path) -> None:
    entries = [
        Entry("t/libggml.so.0", b"\x7fELF"),
        Entry("t/libggml.so", kind="symlink", target="libggml.so.0"),
        Entry("t/libggml.so", kind="symlink", target="libggml.so.0"),
    ]
    staging = unpack(tmp_path, "dup.tar.gz", make_tar(entries))
    assert os.readlink(staging / "t" / "libggml.so") == "libggml.so.0"


BOMB = b"\0" * (4 << 20)


@pytest.mark.parametrize(
    ("name", "entries", "message"),
    [
        ("slip.zip", [Entry("../../evil.txt", b"x")], "'..'"),
        ("slip.tar.gz", [Entry("ok/../../evil.txt", b"x")], "'..'"),
        ("abs.tar.gz", [Entry("/tmp/evil-abs.txt", b"x")], "absolute path"),
        ("drive.zip", [Entry("C:/evil.txt", b"x")], "absolute path"),
        ("sym.tar.gz", [Entry("lib", kind="symlink", target="../../outside")], "outside"),
        (
            "symabs.tar.gz",
            [Entry("passwd", kind="symlink", target="/etc/passwd")],
            "absolute target",
        ),
        ("symzip.zip", [Entry("passwd", kind="symlink", target="/etc/passwd")], "absolute target"),
        ("hard.tar.gz", [Entry("x", kind="hardlink", target="../../etc/passwd")], "'..'"),
        ("hardabs.tar.gz", [Entry("x", kind="hardlink", target="/etc/passwd")], "absolute path"),
        (
            "chain.tar.gz",
            [
                Entry("a/b/c", kind="symlink", target="../.."),
                Entry("a/b/c/d", kind="symlink", target="../../escape"),
            ],
            "escapes",
        ),
        (
            "linkroot.tar.gz",
            [
                Entry("s", kind="symlink", target="."),
                Entry("t", kind="symlink", target="/".join(["s"] * 14 + [".."] * 14)),
                Entry("u", kind="symlink", target="t/etc"),
            ],
            "escapes",
        ),
        (
            "linkroot-late.zip",
            [
                Entry("t", kind="symlink", target="/".join(["s"] * 3 + [".."] * 3)),
                Entry("s", kind="symlink", target="."),
            ],
            "escapes",
        ),
        (
            "split.tar.gz",
            [Entry(f"z{i}", b"\0" * (1 << 20)) for i in range(8)],
            "together expand",
        ),
        ("bomb.zip", [Entry("zeros.bin", BOMB)], "200:1"),
        (
            "receipt.tar.gz",
            [Entry(".backendmgr.json", kind="symlink", target="llama-server")],
            "the name of backendmgr's receipt",
        ),
        ("receipt.zip", [Entry("./.backendmgr.json", b"{}")], "the name of backendmgr's receipt"),
        (
            "under-receipt.tar.gz",
            [Entry(".backendmgr.json/x", b"{}")],
            "the name of backendmgr's receipt",
        ),
        ("bomb.tar.gz", [Entry("zeros.bin", BOMB)], "200:1"),
    ],
)
def test_malicious_archives_are_refused(
    tmp_path: Path, name: str, entries: list[Entry], message: str
) -> None:
    data = make_zip(entries) if name.endswith(".zip") else make_tar(entries)
    archive = tmp_path / "dl" / name
    archive.parent.mkdir(parents=True)
    archive.write_bytes(data)
    staging = tmp_path / "box" / "staging"
    staging.mkdir(parents=True)
    before = tree(tmp_path)
    with pytest.raises(UnsafeArchive, match=message):
        extract(archive, name, staging, exe_name="llama-server")
    outside = [p for p in tree(tmp_path) if not p.startswith("box/staging/") and p not in before]
    assert outside == []
    assert not Path("/tmp/evil-abs.txt").exists()


def test_device_files_and_fifos_are_skipped_not_created(tmp_path: Path) -> None:
    entries = [Entry("null", kind="chardev"), Entry("pipe", kind="fifo"), Entry("ok", b"1")]
    staging = unpack(tmp_path, "dev.tar.gz", make_tar(entries))
    assert tree(staging) == ["ok"]


def test_member_larger_than_declared_is_refused(tmp_path: Path) -> None:
    data = make_zip([Entry("f", b"a" * 1000)])
    # shrink the declared size in both headers: the real stream is larger than claimed
    patched = data.replace((1000).to_bytes(4, "little"), (10).to_bytes(4, "little"))
    archive = tmp_path / "x.zip"
    archive.write_bytes(patched)
    staging = tmp_path / "s"
    staging.mkdir()
    with pytest.raises((UnsafeArchive, zipfile.BadZipFile)):
        extract(archive, "x.zip", staging, exe_name="f")


def test_garbage_is_a_clear_error(tmp_path: Path) -> None:
    archive = tmp_path / "x.tar.gz"
    archive.write_bytes(b"not an archive at all")
    staging = tmp_path / "s"
    staging.mkdir()
    with pytest.raises(UnsafeArchive, match="not a readable archive"):
        extract(archive, "x.tar.gz", staging, exe_name="f")


@pytest.mark.parametrize("fast", [True, False], ids=["fastest-inflate", "standard-zlib"])
@pytest.mark.parametrize("fmt", ["tar.gz", "zip"])
def test_deflate_with_or_without_the_fast_library(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fmt: str, fast: bool
) -> None:
    """Where ISA-L has no wheel the standard library inflates: same bytes, same CRC check."""
    if not fast:
        monkeypatch.setattr(inflate, "fast_zlib", zlib)
    noise = os.urandom(300_000) + bytes(700_000) + b"_ZN4ggml" * 40_000  # > one 256 KiB piece
    entries = [*llama_entries("b1"), Entry("build/bin/libbig.so", noise)]
    data = make_zip(entries) if fmt == "zip" else make_tar(entries)
    staging = unpack(tmp_path, f"a.{fmt}", data)
    assert (staging / "build" / "bin" / "libbig.so").read_bytes() == noise
    if fmt == "zip":  # flip one byte of the member's stored CRC-32: refused, as zipfile would
        at = data.rindex(b"build/bin/libbig.so") - 46  # its central directory record
        crc = int.from_bytes(data[at + 16 : at + 20], "little") ^ 1
        bad = data[: at + 16] + crc.to_bytes(4, "little") + data[at + 20 :]
        with pytest.raises(UnsafeArchive, match="not a readable archive: Bad CRC-32"):
            unpack(tmp_path / "bad", "a.zip", bad)


@pytest.mark.parametrize("fmt", ["gz", "xz"])
def test_concatenated_streams_are_one_archive(tmp_path: Path, fmt: str) -> None:
    """``gzip -c a b`` and ``xz -c a b`` write one stream after another; tar reads them as one."""
    import gzip
    import lzma

    plain = make_tar(llama_entries("b1"), "")
    half = len(plain) // 2
    pack = gzip.compress if fmt == "gz" else lzma.compress
    staging = unpack(tmp_path, f"a.tar.{fmt}", pack(plain[:half]) + pack(plain[half:]))
    assert (staging / "build" / "bin" / "LICENSE").read_bytes() == b"MIT\n"
    assert os.readlink(staging / "build" / "bin" / "libggml.so") == "libggml.so.0"


@pytest.mark.parametrize("fmt", ["tar.gz", "zip"])
def test_a_second_asset_is_checked_against_the_first_ones_links(tmp_path: Path, fmt: str) -> None:
    """A member is looked up on disk only where a link may already be: an empty staging folder
    has none until its own links are made, a second asset finds the first one's."""
    outside = tmp_path / "outside"
    outside.mkdir()
    staging = tmp_path / "box" / "staging"
    staging.mkdir(parents=True)
    (staging / "lib").symlink_to(outside)  # as if an earlier asset had made it
    build = make_zip if fmt == "zip" else (lambda e: make_tar(e, "gz"))
    archive = tmp_path / f"b.{fmt}"
    archive.write_bytes(build([Entry("lib/evil.so", b"x")]))
    with pytest.raises(UnsafeArchive, match="a link leads it outside"):
        extract(archive, archive.name, staging, exe_name="llama-server")
    assert list(outside.iterdir()) == []
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    extract(archive, archive.name, fresh, exe_name="llama-server")
    assert (fresh / "lib" / "evil.so").read_bytes() == b"x"


def test_the_receipt_is_never_written_through_a_link(tmp_path: Path) -> None:
    """Whatever put a link at the receipt's name (an archive once did), the receipt does not
    overwrite what it points at."""
    from backendmgr._fs import LinkRefused
    from backendmgr.install.store import RECEIPT, Receipt, write_receipt

    exe = tmp_path / "llama-server"
    exe.write_bytes(b"#!/bin/sh\n")
    (tmp_path / RECEIPT).symlink_to("llama-server")
    receipt = Receipt(
        component="llama-server",
        version="b1",
        variant="cpu",
        source="s",
        exe="x",
        installed_at="2026-12-03T00:00:00+00:00",
        backendmgr_version="0",
    )
    with pytest.raises(LinkRefused):
        write_receipt(tmp_path, receipt)
    assert exe.read_bytes() == b"#!/bin/sh\n"
