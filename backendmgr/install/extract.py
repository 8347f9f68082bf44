"""Unpack an archive into a staging folder without letting it write anywhere else (§7.3).

Regular files and folders come first; links are made in a second pass, once every target
exists, because llama.cpp's tarballs list ``libggml.so -> libggml.so.0`` before the library.
"""

from __future__ import annotations

import contextlib
import errno
import lzma
import os
import shutil
import stat
import tarfile
import time
import zipfile
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from ..errors import UnsafeArchive
from . import stages
from .formats import MAX_TOTAL, archive_format, streamable
from .inflate import DATA_ERRORS, Served, Source, Unpacked, zip_member
from .placing import Link, Places, clean_name, link_target_ok, make_links, safe_relpath
from .tarheaders import PlainHeaders
from .writer import FileWriter, writing

__all__ = [
    "MAX_TOTAL",
    "ExtractReport",
    "archive_format",
    "extract",
    "extract_stream",
    "find_executable",
    "streamable",
]

MAX_ENTRIES = 100_000
MAX_RATIO = 200
RATIO_FLOOR = 1 << 20
COPY_CHUNK = 1 << 20
MAX_LINK_TARGET = 4096
# Past this much unpacked, a compressed tar that has so far expanded more than MAX_RATIO:1 is a
# bomb already: refused before it writes the rest, not when its total is known.
RUNNING_FLOOR = 64 << 20

# What the archive libraries raise on malformed input (a corrupt stream, an encrypted or
# unknown-method zip member, a NUL byte in a path): one place turns them into UnsafeArchive.
_UNREADABLE: tuple[type[BaseException], ...] = (
    zipfile.BadZipFile,
    zipfile.LargeZipFile,
    tarfile.TarError,
    EOFError,
    UnicodeError,
    lzma.LZMAError,
    zlib.error,
    *DATA_ERRORS,
    NotImplementedError,
    RuntimeError,
    ValueError,
)


@dataclass(repr=False, eq=False)
class ExtractReport:
    files: int = 0
    links: int = 0
    bytes: int = 0
    skipped: list[str] = field(default_factory=list)


def _gib(n: int) -> str:
    return f"{n / (1 << 30):g} GiB"


class _Budget:
    """Entry count, total size and expansion ratio, per member and for the archive so far."""

    def __init__(self, archive: str, compressed: int, limit: int = MAX_TOTAL) -> None:
        self.archive = archive
        self.compressed = max(compressed, 1)
        self.limit = limit
        self.total = 0
        self.entries = 0
        self.source: Unpacked | None = None  # a compressed tar's bytes taken so far

    def entry(self) -> None:
        self.entries += 1
        if self.entries > MAX_ENTRIES:
            raise UnsafeArchive(f"{self.archive}: more than {MAX_ENTRIES} entries")

    def _too_big(self) -> UnsafeArchive:
        return UnsafeArchive(
            f"{self.archive}: unpacks to more than {_gib(self.limit)} (max_unpacked_gb in the "
            "config sets this limit)"
        )

    def declare(self, name: str, size: int, packed: int | None) -> None:
        if self.total + size > self.limit:
            raise self._too_big()
        ratio_base = packed if packed is not None else self.compressed
        if size > RATIO_FLOOR and size / max(ratio_base, 1) > MAX_RATIO:
            raise UnsafeArchive(
                f"{self.archive}: {name!r} expands more than {MAX_RATIO}:1; refusing a likely bomb"
            )

    def add(self, n: int) -> None:
        self.total += n
        if self.total > self.limit:
            raise self._too_big()
        if (self.total > RATIO_FLOOR and self.total / self.compressed > MAX_RATIO) or (
            self.source is not None
            and self.total > RUNNING_FLOOR
            and self.total > MAX_RATIO * self.source.consumed
        ):
            raise UnsafeArchive(
                f"{self.archive}: its members together expand more than {MAX_RATIO}:1; "
                "refusing a likely bomb"
            )


def _write_file(
    data: Iterable[bytes | memoryview],
    dest: Path,
    declared: int,
    budget: _Budget,
    name: str,
    mode: int,
    writer: FileWriter,
) -> int:
    """Hand ``data`` to ``writer`` for a new file at ``dest`` with ``mode``, each piece counted
    against the budget before it is handed over; the bytes handed over (never more than
    ``declared``)."""
    written = 0
    writer.open(dest, mode)
    for piece in data:
        written += len(piece)
        budget.add(len(piece))
        if written > declared:
            raise UnsafeArchive(f"{budget.archive}: {name!r} is larger than it claims")
        writer.write(piece)
    writer.close()
    return written


def _chunks(src: Source) -> Iterator[bytes]:
    return iter(lambda: src.read(COPY_CHUNK), b"")


def _mode(mode: int) -> int:
    """A member's permission bits as installed: the owner may always read and write; group and
    others never write (a world-writable ``llama-server`` is one any local user can replace,
    and GNU tar run by a user masks the same bits); setuid, setgid and sticky never pass."""
    return (mode & 0o755) | 0o600 if mode else 0o644


def _read_link_target(zf: zipfile.ZipFile, info: zipfile.ZipInfo, archive: str) -> str:
    """A zip symlink's target is its data: read no more than a path can be."""
    with zf.open(info) as src:
        data = src.read(MAX_LINK_TARGET + 1)
    if len(data) > MAX_LINK_TARGET:
        raise UnsafeArchive(f"{archive}: link {info.filename!r} has an oversized target")
    return data.decode("utf-8")


def _extract_zip(path: Path, root: Path, name: str, report: ExtractReport, limit: int) -> None:
    budget = _Budget(name, path.stat().st_size, limit)
    places = Places(root, name)
    links: list[Link] = []
    with zipfile.ZipFile(path) as zf, path.open("rb") as fh:
        infos = zf.infolist()
        if len(infos) > MAX_ENTRIES:
            raise UnsafeArchive(f"{name}: more than {MAX_ENTRIES} entries")
        with writing() as writer:
            zip_members(zf, fh, infos, report, budget, places.drained_by(writer), links, writer)
    report.bytes += budget.total
    report.links += make_links(root, links, name, fresh=places.fresh)


def zip_entry(info: zipfile.ZipInfo, budget: _Budget) -> tuple[PurePosixPath, int, str] | None:
    """Count the entry; its place, its unix mode and what it is by the central directory
    ("dir", "link", "other": a device or FIFO, never made, or "file"); None for the root."""
    budget.entry()
    rel = safe_relpath(info.filename, budget.archive)
    if rel is None:
        return None
    if info.header_offset < 0:  # offsets gone wrong: zipfile would seek before the file
        raise zipfile.BadZipFile(f"{info.filename!r}: its local header lies before the file")
    unix_mode = info.external_attr >> 16
    file_type = stat.S_IFMT(unix_mode)
    if info.is_dir() or file_type == stat.S_IFDIR:
        return rel, unix_mode, "dir"
    if file_type == stat.S_IFLNK:
        return rel, unix_mode, "link"
    return rel, unix_mode, "file" if file_type in (0, stat.S_IFREG) else "other"


def zip_members(
    zf: zipfile.ZipFile,
    fh: BinaryIO,
    infos: list[zipfile.ZipInfo],
    report: ExtractReport,
    budget: _Budget,
    places: Places,
    links: list[Link],
    writer: FileWriter,
) -> None:
    """Unpack ``infos`` of ``zf`` (``fh``: the same file) under ``places.root``, the files
    written by ``writer``; links are collected for the end (also for the rest of a zip
    streamed in part: zipstream.py)."""
    root, name = places.root, budget.archive
    for info in infos:
        if (entry := zip_entry(info, budget)) is None:
            continue
        rel, unix_mode, kind = entry
        if kind == "dir":
            places.folder(rel)
            continue
        if kind == "link":
            target = _read_link_target(zf, info, name)
            link_target_ok(root, rel, target, name, info.filename)
            links.append(Link(rel, target, hard=False))
            continue
        if kind == "other":
            report.skipped.append(info.filename)
            continue
        budget.declare(info.filename, info.file_size, info.compress_size)
        dest = places.file(rel)
        if info.flag_bits & 0x1:
            raise UnsafeArchive(
                f"{name}: {info.filename!r} is encrypted; password-protected archives are "
                "not supported"
            )
        mode = _mode(unix_mode)
        if info.compress_type == zipfile.ZIP_DEFLATED:  # inflated faster than zipfile does
            # one byte past the size: a member larger than it claims is caught
            data: Iterable[bytes | memoryview] = zip_member(fh, info).views(info.file_size + 1)
            _write_file(data, dest, info.file_size, budget, info.filename, mode, writer)
        else:
            with zf.open(info) as src:
                data = _chunks(src)
                _write_file(data, dest, info.file_size, budget, info.filename, mode, writer)
        report.files += 1


_COMPRESSED_MAGIC = (b"\x1f\x8b", b"\xfd7zXZ", b"BZh", b"\x28\xb5\x2f\xfd")


def _is_plain_tar(path: Path) -> bool:
    with path.open("rb") as fh:
        head = fh.read(6)
    return not head.startswith(_COMPRESSED_MAGIC)


def _copy_range(src_fd: int, offset: int, size: int, dest: Path, budget: _Budget) -> None:
    """Copy ``size`` bytes at ``offset`` of an uncompressed archive in the kernel."""
    budget.add(size)
    with dest.open("wb") as out:
        done = 0
        while done < size:
            n = os.copy_file_range(src_fd, out.fileno(), size - done, offset + done)
            if n == 0:
                raise UnsafeArchive(f"{budget.archive}: {dest.name!r} is cut short")
            done += n


# How a regular member's data is copied: by range in the kernel (an uncompressed tar on disk),
# from the decompressed pieces (a compressed one), or through tarfile (sparse members).
_Data = int | Served | None


def _tar_stream(path: Path, budget: _Budget) -> Iterator[tuple[tarfile.TarFile, _Data]]:
    """The archive's members in order, and where their data comes from."""
    if hasattr(os, "copy_file_range") and _is_plain_tar(path):
        # An uncompressed tar can be read at random: members are copied in the kernel.
        with (
            path.open("rb") as raw,
            tarfile.open(fileobj=raw, mode="r:", tarinfo=PlainHeaders) as tf,
        ):
            yield tf, raw.fileno()
        return
    with path.open("rb", buffering=0) as fh:
        yield from _unpacked_stream(fh, budget)


def _unpacked_stream(src: Source, budget: _Budget) -> Iterator[tuple[tarfile.TarFile, _Data]]:
    """A compressed tar decompressed in bounded pieces (inflate.py), which tarfile reads as a
    plain tar (``r:``: headers only) while the data goes from the pieces to the files:
    linear in the archive whatever its ratio, and no copy of the data in Python."""
    budget.source = Unpacked(src)
    with tarfile.open(  # type: ignore[call-overload]
        fileobj=budget.source, mode="r:", tarinfo=PlainHeaders
    ) as tf:
        yield tf, budget.source


def _extract_tar(path: Path, root: Path, name: str, report: ExtractReport, limit: int) -> None:
    budget = _Budget(name, path.stat().st_size, limit)
    _extract_members(_tar_stream(path, budget), root, name, report, budget)


def _extract_members(
    stream: Iterator[tuple[tarfile.TarFile, _Data]],
    root: Path,
    name: str,
    report: ExtractReport,
    budget: _Budget,
) -> None:
    places = Places(root, name)
    links: list[Link] = []
    # Empty files have no data to wait for: they are made at the end, once the entry count is
    # known, so that an archive of 100 001 of them is refused before it touches the disk.
    empty: dict[str, int] = {}
    for tf, source in stream:
        # the files are written by a second thread, except where the kernel copies them
        with writing(threaded=not isinstance(source, int)) as writer:
            places.drained_by(writer)
            while True:
                started = time.perf_counter()
                member = tf.next()
                stages.add("tar_headers", time.perf_counter() - started)
                if member is None:
                    break
                # tarfile keeps every header it read (not in its stubs); nothing here looks back
                tf.members.clear()  # type: ignore[attr-defined]
                budget.entry()
                if member.isreg() and not member.size:
                    if clean := clean_name(member.name, name):
                        empty[clean] = _mode(member.mode)
                    continue
                rel = safe_relpath(member.name, name)
                if rel is None:
                    continue
                empty.pop(str(rel), None)  # a later entry of the same name replaces it
                if member.isdir():
                    places.folder(rel)
                elif member.issym():
                    link_target_ok(root, rel, member.linkname, name, member.name)
                    links.append(Link(rel, member.linkname, hard=False))
                elif member.islnk():
                    target_rel = safe_relpath(member.linkname, name)
                    if target_rel is None:
                        raise UnsafeArchive(
                            f"{name}: hard link {member.name!r} to the archive root"
                        )
                    links.append(Link(rel, str(target_rel), hard=True))
                elif member.isreg():
                    budget.declare(member.name, member.size, None)
                    dest = places.file(rel)
                    if isinstance(source, int) and not member.sparse:
                        _copy_range(source, member.offset_data, member.size, dest, budget)
                        os.chmod(dest, _mode(member.mode))
                    else:
                        if isinstance(source, Served) and not member.sparse:
                            data: Iterable[bytes | memoryview] = source.views(member.size)
                        else:
                            extracted = tf.extractfile(member)
                            assert extracted is not None  # a regular member
                            data = _chunks(extracted)
                        size, mode = member.size, _mode(member.mode)
                        if _write_file(data, dest, size, budget, member.name, mode, writer) < size:
                            raise tarfile.ReadError("unexpected end of data")
                    report.files += 1
                else:
                    report.skipped.append(member.name)  # devices, FIFOs: never created
    with writing(threaded=False) as writer:
        places.drained_by(writer)
        for clean, mode in empty.items():
            dest = places.file(PurePosixPath(clean))
            _write_file((), dest, 0, budget, clean, mode, writer)
            report.files += 1
    report.bytes += budget.total
    report.links += make_links(root, links, name, fresh=places.fresh)


def _unreadable(exc: BaseException) -> bool:
    """A library's complaint about the archive's bytes, as opposed to a failing disk."""
    if isinstance(exc, _UNREADABLE):
        return True
    if isinstance(exc, OSError):
        return exc.errno is None  # gzip/bz2 data errors carry no errno; ENOSPC and EIO do
    return type(exc).__module__.startswith("zstandard")


def extract(
    path: Path, asset_name: str, root: Path, *, exe_name: str, max_total: int = MAX_TOTAL
) -> ExtractReport:
    """Unpack ``path`` into ``root``, an empty staging folder; a bare asset becomes ``exe_name``.

    ``max_total`` caps the bytes this archive may unpack. Whatever the archive library raises
    about malformed input becomes one UnsafeArchive line here, for every format."""
    report = ExtractReport()
    kind = archive_format(asset_name)
    with _readable(asset_name, root):
        if kind == "zip":
            _extract_zip(path, root, asset_name, report, max_total)
        elif kind in ("tar", "tar.zst"):
            _extract_tar(path, root, asset_name, report, max_total)
        else:
            size = path.stat().st_size
            if size > max_total:
                raise _Budget(asset_name, size, max_total)._too_big()
            dest = root / exe_name
            shutil.copyfile(path, dest)
            os.chmod(dest, 0o755)
            report.files += 1
            report.bytes += size
    return report


def extract_stream(
    src: Source, asset_name: str, root: Path, *, compressed: int, max_total: int = MAX_TOTAL
) -> ExtractReport:
    """Unpack a compressed tar read from ``src`` as it arrives, with the same checks and
    limits as :func:`extract`; ``compressed`` (the size the release states) bounds the
    expansion ratio, since the file is still growing."""
    report = ExtractReport()
    budget = _Budget(asset_name, compressed, max_total)
    with _readable(asset_name, root):
        _extract_members(_unpacked_stream(src, budget), root, asset_name, report, budget)
    return report


_CLASHES = frozenset({errno.EEXIST, errno.EISDIR, errno.ENOTDIR})


@contextlib.contextmanager
def _readable(asset_name: str, root: Path) -> Iterator[None]:
    """Whatever the archive library raises about malformed input becomes one line; so does a
    name the archive gives both to a file and to a folder (in either order), named as the
    archive names it, not by the staging folder that is removed with the error."""
    try:
        yield
    except UnsafeArchive:
        raise
    except Exception as exc:
        if isinstance(exc, OSError) and exc.errno in _CLASHES and exc.filename is not None:
            where = Path(os.fsdecode(exc.filename))
            if where.is_relative_to(root):
                name = where.relative_to(root).as_posix()
                raise UnsafeArchive(
                    f"{asset_name}: {name!r} is both a file and a folder in the archive"
                ) from exc
        if not _unreadable(exc):
            raise
        text = str(exc).strip()
        reason = text.splitlines()[0][:200] if text else type(exc).__name__
        raise UnsafeArchive(f"{asset_name} is not a readable archive: {reason}") from exc


def find_executable(root: Path, exe_name: str) -> Path | None:
    """The first regular file named ``exe_name`` (any case), in lexical walk order."""
    wanted = exe_name.lower()
    wanted_base = PurePosixPath(exe_name).name.lower()
    direct = root / exe_name
    if "/" in exe_name and direct.is_file() and not direct.is_symlink():
        return direct
    for folder, dirs, files in os.walk(root):
        dirs.sort()
        for fname in sorted(files):
            if fname.lower() in (wanted, wanted_base):
                candidate = Path(folder) / fname
                if candidate.is_file() and not candidate.is_symlink():
                    return candidate
    return None
