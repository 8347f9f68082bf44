"""Real archives the installer tests build: llama.cpp-shaped tarballs and zips, and a tree
listing for before/after checks."""

from __future__ import annotations

import io
import os
import stat
import struct
import tarfile
import zipfile
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path


def server_script(
    tag: str,
    *,
    needs_lib: bool = True,
    fail: bool = False,
    help_text: str | None = None,
    devices: str | None = None,
) -> bytes:
    """A stand-in llama-server: prints its version, and fails like the real one when the
    library it links against is missing. With ``help_text`` it answers ``--help`` with it,
    with ``devices`` it answers ``--list-devices`` (both as llama-server does, on stdout)."""
    lines = ["#!/bin/sh", 'here=$(dirname "$0")']
    for flag, text in (("--help", help_text), ("--list-devices", devices)):
        if text is not None:
            assert "\nEND_OF_TEXT\n" not in f"\n{text}\n"
            lines.append(f'if [ "$1" = "{flag}" ]; then cat <<\'END_OF_TEXT\'\n{text}\nEND_OF_TEXT')
            lines.append("exit 0; fi")
    if needs_lib:
        lines.append(
            '[ -e "$here/libggml.so.0" ] || { echo "error while loading shared libraries: '
            'libggml.so.0: cannot open shared object file" >&2; exit 127; }'
        )
    if fail:
        lines.append('echo "Illegal instruction (core dumped)" >&2; exit 132')
    lines.append(f'echo "version: {tag.lstrip("b")} ({tag})"')
    return ("\n".join(lines) + "\n").encode()


@dataclass
class Entry:
    name: str
    data: bytes = b""
    kind: str = "file"  # file, dir, symlink, hardlink, chardev, fifo
    target: str = ""
    mode: int = 0o644


def llama_entries(
    tag: str,
    *,
    top: str = "build/bin",
    fail: bool = False,
    help_text: str | None = None,
    devices: str | None = None,
) -> list[Entry]:
    """What llama.cpp's Linux tarball holds: links listed before the library they point to."""
    script = server_script(tag, fail=fail, help_text=help_text, devices=devices)
    lib = "libggml.so.0.9.4"
    return [
        Entry(f"{top}/", kind="dir", mode=0o755),
        Entry(f"{top}/libggml.so", kind="symlink", target="libggml.so.0"),
        Entry(f"{top}/libggml.so.0", kind="symlink", target=lib),
        Entry(f"{top}/llama-server", script, mode=0o755),
        Entry(f"{top}/{lib}", b"\x7fELF fake library " * 64, mode=0o644),
        Entry(f"{top}/LICENSE", b"MIT\n"),
    ]


def make_tar(entries: Iterable[Entry], compression: str = "gz") -> bytes:
    buf = io.BytesIO()
    mode = {"gz": "w:gz", "xz": "w:xz", "": "w"}[compression]
    with tarfile.open(fileobj=buf, mode=mode) as tf:  # type: ignore[call-overload]
        for e in entries:
            info = tarfile.TarInfo(e.name)
            info.mode = e.mode
            info.mtime = 1_700_000_000
            if e.kind == "dir":
                info.type = tarfile.DIRTYPE
                tf.addfile(info)
            elif e.kind == "symlink":
                info.type, info.linkname = tarfile.SYMTYPE, e.target
                tf.addfile(info)
            elif e.kind == "hardlink":
                info.type, info.linkname = tarfile.LNKTYPE, e.target
                tf.addfile(info)
            elif e.kind == "chardev":
                info.type, info.devmajor, info.devminor = tarfile.CHRTYPE, 1, 3
                tf.addfile(info)
            elif e.kind == "fifo":
                info.type = tarfile.FIFOTYPE
                tf.addfile(info)
            else:
                info.size = len(e.data)
                tf.addfile(info, io.BytesIO(e.data))
    return buf.getvalue()


def make_tar_zst(entries: Iterable[Entry]) -> bytes:
    import zstandard

    return zstandard.ZstdCompressor().compress(make_tar(entries, ""))


def make_zip(entries: Iterable[Entry]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for e in entries:
            info = zipfile.ZipInfo(e.name, date_time=(2026, 9, 27, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            if e.kind == "symlink":
                info.external_attr = (stat.S_IFLNK | 0o777) << 16
                zf.writestr(info, e.target)
            elif e.kind == "dir":
                info.external_attr = (stat.S_IFDIR | 0o755) << 16
                zf.writestr(info, b"")
            else:
                info.external_attr = (stat.S_IFREG | e.mode) << 16
                zf.writestr(info, e.data)
    return buf.getvalue()


def tree(root: Path) -> list[str]:
    """Every path below ``root`` (links shown with their targets) for before/after checks."""
    out = []
    for folder, dirs, files in os.walk(root):
        for name in sorted(dirs + files):
            p = Path(folder) / name
            rel = p.relative_to(root).as_posix()
            out.append(f"{rel} -> {os.readlink(p)}" if p.is_symlink() else rel)
    return sorted(out)


def empty_files_tar_gz(count: int, top: str = "tool") -> bytes:
    """A ``.tar.gz`` of ``count`` empty files, its ustar headers stamped from one template
    (tarfile's writer takes seconds for 100 000 entries)."""
    info = tarfile.TarInfo("x")
    info.mtime = 1_700_000_000
    template = bytearray(info.tobuf(tarfile.USTAR_FORMAT))
    template[0:100] = bytes(100)
    template[148:156] = b" " * 8  # the checksum is summed over spaces in its own field
    base = sum(template)
    headers = []
    for i in range(count):
        name = f"{top}/e{i}".encode()
        header = bytearray(template)
        header[: len(name)] = name
        header[148:155] = b"%06o\0" % (base + sum(name))
        headers.append(bytes(header))
    from backendmgr.install.inflate import fast_zlib  # ISA-L compresses them in a blink

    return bytes(fast_zlib.compress(b"".join(headers) + bytes(1024), 1, wbits=31))


def zeros_bomb_tar_gz(members: int, size: int, top: str = "tool") -> bytes:
    """One gzip stream of a tar whose ``members`` files each hold ``size`` zeros (a multiple
    of 1 MiB): a split bomb, compressed once per MiB and repeated, since deflate after a full
    flush starts afresh (compressing gigabytes of zeros takes seconds)."""
    from backendmgr.install.inflate import fast_zlib

    block = bytes(1 << 20)
    deflate = zlib.compressobj(9, zlib.DEFLATED, -15)
    deflate.compress(block)
    deflate.flush(zlib.Z_FULL_FLUSH)
    piece = deflate.compress(block) + deflate.flush(zlib.Z_FULL_FLUSH)
    out = [b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"]  # gzip header: no name, no mtime
    crc = 0
    for i in range(members):
        info = tarfile.TarInfo(f"{top}/zeros{i}.bin")
        info.size, info.mtime = size, 1_700_000_000
        header = info.tobuf(tarfile.USTAR_FORMAT)
        out.append(deflate.compress(header) + deflate.flush(zlib.Z_FULL_FLUSH))
        out.append(piece * (size >> 20))
        crc = fast_zlib.crc32(header, crc)
        for _ in range(size >> 20):
            crc = fast_zlib.crc32(block, crc)
    end = bytes(1024)
    out.append(deflate.compress(end) + deflate.flush())
    crc = fast_zlib.crc32(end, crc)
    total = members * (512 + size) + len(end)
    out.append(struct.pack("<II", crc, total & 0xFFFFFFFF))
    return b"".join(out)
