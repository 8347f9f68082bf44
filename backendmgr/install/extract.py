"""Unpack an archive into a staging folder without letting it write anywhere else (§7.3).

Regular files and folders come first; links are made in a second pass, once every target
exists, because llama.cpp's tarballs list ``libggml.so -> libggml.so.0`` before the library.
"""

from __future__ import annotations

import os
import shutil
import stat
import tarfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import IO, BinaryIO

from ..errors import UnsafeArchive

__all__ = ["ExtractReport", "archive_format", "extract", "find_executable"]

MAX_ENTRIES = 100_000
MAX_TOTAL = 32 << 30
MAX_RATIO = 200
RATIO_FLOOR = 1 << 20
COPY_CHUNK = 1 << 20


@dataclass
class ExtractReport:
    files: int = 0
    links: int = 0
    skipped: list[str] = field(default_factory=list)


def archive_format(name: str) -> str:
    lowered = name.lower()
    for suffix, kind in (
        (".zip", "zip"),
        (".tar.gz", "tar"),
        (".tgz", "tar"),
        (".tar.xz", "tar"),
        (".txz", "tar"),
        (".tar.zst", "tar.zst"),
        (".tzst", "tar.zst"),
        (".tar", "tar"),
    ):
        if lowered.endswith(suffix):
            return kind
    return "bare"


def _safe_relpath(name: str, archive: str) -> PurePosixPath | None:
    """The member's path inside the target, or an UnsafeArchive; None for the root itself."""
    text = name.replace("\\", "/")
    if text.startswith("/") or (len(text) > 1 and text[1] == ":"):
        raise UnsafeArchive(f"{archive}: refusing absolute path {name!r}")
    parts = [p for p in text.split("/") if p not in ("", ".")]
    if any(p == ".." for p in parts):
        raise UnsafeArchive(f"{archive}: refusing path with '..' {name!r}")
    return PurePosixPath(*parts) if parts else None


def _inside(root: Path, rel: PurePosixPath) -> Path:
    return root.joinpath(*rel.parts)


def _link_target_ok(root: Path, rel: PurePosixPath, target: str, archive: str, name: str) -> None:
    text = target.replace("\\", "/")
    if not text or text.startswith("/") or (len(text) > 1 and text[1] == ":"):
        raise UnsafeArchive(f"{archive}: refusing link {name!r} to absolute target {target!r}")
    resolved = os.path.normpath(os.path.join(str(root), *rel.parent.parts, text))
    if os.path.commonpath([resolved, str(root)]) != str(root):
        raise UnsafeArchive(f"{archive}: refusing link {name!r} pointing outside ({target!r})")


class _Budget:
    def __init__(self, archive: str, compressed: int) -> None:
        self.archive = archive
        self.compressed = max(compressed, 1)
        self.total = 0
        self.entries = 0

    def entry(self) -> None:
        self.entries += 1
        if self.entries > MAX_ENTRIES:
            raise UnsafeArchive(f"{self.archive}: more than {MAX_ENTRIES} entries")

    def declare(self, name: str, size: int, packed: int | None) -> None:
        if self.total + size > MAX_TOTAL:
            raise UnsafeArchive(f"{self.archive}: more than 32 GiB uncompressed")
        ratio_base = packed if packed is not None else self.compressed
        if size > RATIO_FLOOR and size / max(ratio_base, 1) > MAX_RATIO:
            raise UnsafeArchive(
                f"{self.archive}: {name!r} expands more than {MAX_RATIO}:1; refusing a likely bomb"
            )

    def add(self, n: int) -> None:
        self.total += n
        if self.total > MAX_TOTAL:
            raise UnsafeArchive(f"{self.archive}: more than 32 GiB uncompressed")


def _copy_limited(src: IO[bytes], dest: Path, declared: int, budget: _Budget, name: str) -> None:
    written = 0
    with dest.open("wb") as out:
        while chunk := src.read(COPY_CHUNK):
            written += len(chunk)
            budget.add(len(chunk))
            if written > declared:
                raise UnsafeArchive(f"{budget.archive}: {name!r} is larger than it claims")
            out.write(chunk)


def _mode(mode: int) -> int:
    return (mode & 0o777) | 0o600 if mode else 0o644


@dataclass
class _Link:
    rel: PurePosixPath
    target: str
    hard: bool


def _check_real_location(root: Path, link: _Link) -> None:
    """Re-check a link against the real folder it lands in: an earlier link may be its parent."""
    real_root = os.path.realpath(root)
    real_parent = os.path.realpath(_inside(root, link.rel).parent)
    if os.path.commonpath([real_parent, real_root]) != real_root:
        raise UnsafeArchive(f"refusing link {str(link.rel)!r}: its folder resolves outside")
    if link.hard:
        real_target = os.path.realpath(_inside(root, PurePosixPath(link.target)))
    else:
        real_target = os.path.normpath(os.path.join(real_parent, link.target))
    if os.path.commonpath([real_target, real_root]) != real_root:
        raise UnsafeArchive(f"refusing link {str(link.rel)!r} to {link.target!r}: it escapes")


def _make_links(root: Path, links: list[_Link], report: ExtractReport) -> None:
    pending = list(links)
    for _ in range(len(pending) + 1):
        if not pending:
            return
        later: list[_Link] = []
        for link in pending:
            dest = _inside(root, link.rel)
            _check_real_location(root, link)
            dest.parent.mkdir(parents=True, exist_ok=True)
            if dest.exists() or dest.is_symlink():
                if dest.is_dir() and not dest.is_symlink():
                    shutil.rmtree(dest)
                else:
                    dest.unlink()
            if link.hard:
                source = _inside(root, PurePosixPath(link.target.replace("\\", "/")))
                if not source.exists():
                    later.append(link)
                    continue
                try:
                    os.link(source, dest)
                except OSError:
                    shutil.copy2(source, dest)
            else:
                try:
                    os.symlink(link.target, dest)
                except OSError:
                    source = dest.parent / link.target
                    if not source.exists():
                        later.append(link)
                        continue
                    shutil.copy2(source, dest, follow_symlinks=True)
            report.links += 1
        if len(later) == len(pending):
            names = ", ".join(str(li.rel) for li in later)
            raise UnsafeArchive(f"links whose targets are missing from the archive: {names}")
        pending = later


def _extract_zip(path: Path, root: Path, name: str, report: ExtractReport) -> None:
    budget = _Budget(name, path.stat().st_size)
    links: list[_Link] = []
    with zipfile.ZipFile(path) as zf:
        infos = zf.infolist()
        if len(infos) > MAX_ENTRIES:
            raise UnsafeArchive(f"{name}: more than {MAX_ENTRIES} entries")
        for info in infos:
            budget.entry()
            rel = _safe_relpath(info.filename, name)
            if rel is None:
                continue
            unix_mode = info.external_attr >> 16
            file_type = stat.S_IFMT(unix_mode)
            if info.is_dir() or file_type == stat.S_IFDIR:
                _inside(root, rel).mkdir(parents=True, exist_ok=True)
                continue
            if file_type == stat.S_IFLNK:
                target = zf.read(info).decode("utf-8", "replace")
                _link_target_ok(root, rel, target, name, info.filename)
                links.append(_Link(rel, target, hard=False))
                continue
            if file_type not in (0, stat.S_IFREG):
                report.skipped.append(info.filename)
                continue
            budget.declare(info.filename, info.file_size, info.compress_size)
            dest = _inside(root, rel)
            dest.parent.mkdir(parents=True, exist_ok=True)
            with zf.open(info) as src:
                _copy_limited(src, dest, info.file_size, budget, info.filename)
            os.chmod(dest, _mode(unix_mode))
            report.files += 1
    _make_links(root, links, report)


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


def _tar_stream(path: Path, kind: str) -> Iterator[tuple[tarfile.TarFile, int | None]]:
    """The archive's members in order, and a file descriptor when data can be copied by range."""
    if kind == "tar" and hasattr(os, "copy_file_range") and _is_plain_tar(path):
        # An uncompressed tar can be read at random: members are copied in the kernel.
        with path.open("rb") as raw, tarfile.open(fileobj=raw, mode="r:") as tf:
            yield tf, raw.fileno()
        return
    if kind == "tar.zst":
        import zstandard

        with path.open("rb") as raw:
            reader: BinaryIO = zstandard.ZstdDecompressor().stream_reader(raw)
            with tarfile.open(fileobj=reader, mode="r|") as tf:
                yield tf, None
        return
    with tarfile.open(path, mode="r|*") as tf:
        yield tf, None


def _extract_tar(path: Path, root: Path, name: str, kind: str, report: ExtractReport) -> None:
    budget = _Budget(name, path.stat().st_size)
    links: list[_Link] = []
    for tf, fd in _tar_stream(path, kind):
        for member in tf:
            budget.entry()
            rel = _safe_relpath(member.name, name)
            if rel is None:
                continue
            if member.isdir():
                _inside(root, rel).mkdir(parents=True, exist_ok=True)
            elif member.issym():
                _link_target_ok(root, rel, member.linkname, name, member.name)
                links.append(_Link(rel, member.linkname, hard=False))
            elif member.islnk():
                target_rel = _safe_relpath(member.linkname, name)
                if target_rel is None:
                    raise UnsafeArchive(f"{name}: hard link {member.name!r} to the archive root")
                links.append(_Link(rel, str(target_rel), hard=True))
            elif member.isreg():
                budget.declare(member.name, member.size, None)
                dest = _inside(root, rel)
                dest.parent.mkdir(parents=True, exist_ok=True)
                if fd is not None and not member.sparse:
                    _copy_range(fd, member.offset_data, member.size, dest, budget)
                else:
                    src = tf.extractfile(member)
                    if src is None:
                        continue
                    _copy_limited(src, dest, member.size, budget, member.name)
                os.chmod(dest, _mode(member.mode))
                report.files += 1
            else:
                report.skipped.append(member.name)  # devices, FIFOs: never created
    _make_links(root, links, report)


def extract(path: Path, asset_name: str, root: Path, *, exe_name: str) -> ExtractReport:
    """Unpack ``path`` into ``root``, an empty staging folder; a bare asset becomes ``exe_name``."""
    report = ExtractReport()
    kind = archive_format(asset_name)
    try:
        if kind == "zip":
            _extract_zip(path, root, asset_name, report)
        elif kind in ("tar", "tar.zst"):
            _extract_tar(path, root, asset_name, kind, report)
        else:
            dest = root / exe_name
            shutil.copyfile(path, dest)
            os.chmod(dest, 0o755)
            report.files += 1
    except (zipfile.BadZipFile, tarfile.TarError, EOFError, UnicodeDecodeError) as exc:
        raise UnsafeArchive(f"{asset_name} is not a readable archive: {exc}") from exc
    except UnsafeArchive:
        raise
    except Exception as exc:
        if type(exc).__module__.startswith("zstandard"):
            raise UnsafeArchive(f"{asset_name} is not a readable archive: {exc}") from exc
        raise
    return report


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
