"""Where an archive's members land: their paths checked as text, then against what is on disk,
and links made last, once every target exists (§7.3)."""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Protocol, Self

from ..errors import UnsafeArchive, escaped
from .receipt import RECEIPT

_CONTROL = re.compile("[\x00-\x1f]")
NAME_MAX = 255
"""Bytes in one file name (Linux's, and most file systems')."""
PATH_MAX = 3072
"""Bytes in a member's whole path: what is left of the kernel's 4096 for the build's folder."""
SHOWN = 120


def shown(name: str) -> str:
    """A member's name or link target as an error line quotes it (a pax header can make one a
    megabyte long): :func:`..errors.escaped`, quoted."""
    return f"'{escaped(name, SHOWN)}'"


def clean_name(name: str, archive: str) -> str:
    """The member's path inside the target as ``a/b/c`` ("" for the root itself), or an
    UnsafeArchive. Plain text, for the cost of 100 000 entries."""
    if len(name) > NAME_MAX // 4:  # short enough in any encoding: nothing to count
        _fits(name, archive)
    if _CONTROL.search(name):
        raise UnsafeArchive(f"{archive}: refusing a path with a control character {shown(name)}")
    text = name.replace("\\", "/")
    if text.startswith("/") or (len(text) > 1 and text[1] == ":"):
        raise UnsafeArchive(f"{archive}: refusing absolute path {shown(name)}")
    parts = [p for p in text.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise UnsafeArchive(f"{archive}: refusing path with '..' {shown(name)}")
    if parts[:1] == [RECEIPT]:  # its place: a link or a folder there would stop the receipt
        raise UnsafeArchive(f"{archive}: refusing {shown(name)}, the name of backendmgr's receipt")
    return "/".join(parts)


def _fits(name: str, archive: str) -> None:
    """A path no file system here could hold is the archive's fault, said as such, not as the
    kernel's "File name too long" about a staging folder."""
    raw = os.fsencode(name)
    if len(raw) > PATH_MAX or max(map(len, raw.replace(b"\\", b"/").split(b"/"))) > NAME_MAX:
        raise UnsafeArchive(
            f"{archive}: refusing a path too long for the file system ({len(raw)} bytes, "
            f"a name at most {NAME_MAX}, the whole at most {PATH_MAX}): {shown(name)}"
        )


def safe_relpath(name: str, archive: str) -> PurePosixPath | None:
    """The member's path inside the target, or an UnsafeArchive; None for the root itself."""
    clean = clean_name(name, archive)
    return PurePosixPath(clean) if clean else None


def inside(root: Path, rel: PurePosixPath) -> Path:
    return root.joinpath(*rel.parts)


def link_target_ok(root: Path, rel: PurePosixPath, target: str, archive: str, name: str) -> None:
    text = target.replace("\\", "/")
    if len(text) > NAME_MAX // 4 and len(os.fsencode(text)) > PATH_MAX:
        raise UnsafeArchive(f"{archive}: refusing link {shown(name)}: its target is too long")
    if any(ord(ch) < 0x20 for ch in text):
        raise UnsafeArchive(f"{archive}: refusing link {shown(name)} with a control character")
    if not text or text.startswith("/") or (len(text) > 1 and text[1] == ":"):
        raise UnsafeArchive(
            f"{archive}: refusing link {shown(name)} to absolute target {shown(target)}"
        )
    resolved = os.path.normpath(os.path.join(str(root), *rel.parent.parts, text))
    if os.path.commonpath([resolved, str(root)]) != str(root):
        raise UnsafeArchive(
            f"{archive}: refusing link {shown(name)} pointing outside ({shown(target)})"
        )


def resolves_inside(root: Path, path: Path | str) -> bool:
    """Whether ``path``, with every link already on disk followed, stays under ``root``."""
    real_root = os.path.realpath(root)
    real = os.path.realpath(path)
    return os.path.commonpath([real, real_root]) == real_root


class _Drains(Protocol):
    def drain(self) -> None: ...


class Places:
    """Where members go, after checking that no link already on disk (an earlier asset's: this
    one's are made last) leads them outside. A folder is checked and made once: until the links
    are made, nothing can turn it into a link, so its members need only their own name checked.

    Under a root that is empty at the start (the first or only asset's staging folder) there is
    no link to check until :func:`make_links`: then no member is looked up on disk at all (an
    ``lstat`` per file, which waits for the writing thread's create in the same folder)."""

    def __init__(self, root: Path, archive: str) -> None:
        self.root = root
        self.archive = archive
        self._made: set[PurePosixPath] = set()
        self._before_mkdir: Callable[[], None] | None = None
        with os.scandir(root) as entries:
            self._linkless = next(entries, None) is None

    @property
    def fresh(self) -> bool:
        """Whether the root was empty when this asset began: all there is came from it."""
        return self._linkless

    def drained_by(self, writer: _Drains) -> Self:
        """Files are written by ``writer``'s thread: a new folder waits for the writes handed
        over before it (a file queued under its name makes ``mkdir`` fail, as without it)."""
        self._before_mkdir = writer.drain
        return self

    def _check(self, rel: PurePosixPath, path: Path) -> None:
        if self._linkless:
            return
        if not resolves_inside(self.root, path):
            raise UnsafeArchive(f"{self.archive}: refusing {str(rel)!r}: a link leads it outside")

    def folder(self, rel: PurePosixPath) -> Path:
        dest = inside(self.root, rel)
        if rel not in self._made:
            if self._before_mkdir is not None:
                self._before_mkdir()
            self._check(rel, dest)
            dest.mkdir(parents=True, exist_ok=True)
            self._made.update(rel.parents)
            self._made.add(rel)
        return dest

    def file(self, rel: PurePosixPath) -> Path:
        dest = self.folder(rel.parent) / rel.name
        if not self._linkless and os.path.islink(dest):
            self._check(rel, dest)
        return dest


@dataclass(repr=False, eq=False)
class Link:
    rel: PurePosixPath
    target: str
    hard: bool


def _escapes(archive: str, link: Link) -> UnsafeArchive:
    return UnsafeArchive(
        f"{archive}: refusing link {str(link.rel)!r} to {link.target!r}: it escapes"
    )


def _check_real_location(root: Path, link: Link, archive: str) -> None:
    """Check a link against what is unpacked now, not as text: an earlier link may be its
    folder or a step of its target (``s -> .`` makes ``s/s/../..`` leave the root)."""
    dest = inside(root, link.rel)
    if not resolves_inside(root, dest.parent):
        raise UnsafeArchive(
            f"{archive}: refusing link {str(link.rel)!r}: its folder resolves outside"
        )
    if link.hard:
        source: Path | str = inside(root, PurePosixPath(link.target))
    else:
        source = os.path.join(os.path.realpath(dest.parent), link.target)
    if not resolves_inside(root, source):
        raise _escapes(archive, link)


def make_links(root: Path, links: list[Link], archive: str, *, fresh: bool) -> int:
    """Make ``links`` (after every file is in place); how many were made.

    Links are made last, so a name the archive gives both to a link and to a file or folder
    would come out as the link whatever the order, where tar lets the later entry win: in an
    archive unpacked into an empty root (``fresh``) that is refused, as a name that is both a
    file and a folder is (one link listed twice alike is one link). A later asset's link still
    replaces an earlier asset's entry."""
    pending = list(links)
    made: list[Link] = []
    made_at: dict[PurePosixPath, tuple[str, bool]] = {}  # what each made link is
    for _ in range(len(pending) + 1):
        if not pending:
            break
        later: list[Link] = []
        for link in pending:
            dest = inside(root, link.rel)
            _check_real_location(root, link, archive)
            dest.parent.mkdir(parents=True, exist_ok=True)
            if dest.exists() or dest.is_symlink():
                if fresh:
                    if made_at.get(link.rel) == (link.target, link.hard):  # listed twice alike
                        continue
                    raise UnsafeArchive(
                        f"{archive}: {str(link.rel)!r} is both a link and another entry in "
                        "the archive"
                    )
                if dest.is_dir() and not dest.is_symlink():
                    shutil.rmtree(dest)
                else:
                    dest.unlink()
            if link.hard:
                source = inside(root, PurePosixPath(link.target.replace("\\", "/")))
                if not source.exists():
                    later.append(link)
                    continue
                try:
                    os.link(source, dest, follow_symlinks=False)
                except OSError:
                    shutil.copy2(source, dest, follow_symlinks=False)
            else:
                try:
                    os.symlink(link.target, dest)
                except OSError:
                    source = dest.parent / link.target
                    if not source.exists():
                        later.append(link)
                        continue
                    if not resolves_inside(root, source):
                        raise _escapes(archive, link) from None
                    shutil.copy2(source, dest, follow_symlinks=True)
                if not resolves_inside(root, dest):
                    dest.unlink()
                    raise _escapes(archive, link)
            made.append(link)
            made_at[link.rel] = (link.target, link.hard)
        if len(later) == len(pending):
            names = ", ".join(str(li.rel) for li in later)
            raise UnsafeArchive(f"{archive}: links whose targets are missing: {names}")
        pending = later
    # A link made later can change where an earlier one leads: check them all as they now are.
    for link in made:
        if not resolves_inside(root, inside(root, link.rel)):
            raise _escapes(archive, link)
    return len(made)
