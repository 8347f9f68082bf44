"""Small filesystem helpers shared by the config store, receipts and the generated config."""

from __future__ import annotations

import contextlib
import io
import json
import os
import stat
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

from .errors import Refused

__all__ = [
    "LinkRefused",
    "NotAFile",
    "ReadOnlyFile",
    "apply_umask",
    "atomic_write_bytes",
    "create_anew",
    "create_exclusive",
    "folder_for",
    "fsync_dir",
    "leftover_temps",
    "link_refused",
    "read_record_file",
    "read_regular",
    "read_regular_stat",
    "remove_leftover_temps",
    "remove_name",
    "sanitize_segment",
    "sync_filesystem",
    "unlink_no_follow",
]

_O_BINARY = getattr(os, "O_BINARY", 0)
_ANY_WRITE = stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH

_SAFE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")


def sanitize_segment(text: str) -> str:
    """Make ``text`` safe as one path segment: ``../../etc`` stays inside its parent folder."""
    cleaned = "".join(ch if ch in _SAFE else "_" for ch in text)[:64]
    if cleaned in ("", ".", ".."):
        return "unknown" if not cleaned else cleaned.replace(".", "_")
    return cleaned


def fsync_dir(path: Path) -> None:
    """Persist a rename: on POSIX the folder entry itself must reach the disk."""
    if os.name != "posix":
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _syncfs() -> Callable[[int], int] | None:
    """Linux's syncfs(2), which the os module does not offer, from the C library."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        call = ctypes.CDLL(None, use_errno=True).syncfs
    except (OSError, AttributeError):  # pragma: no cover - a libc without it
        return None
    call.argtypes = [ctypes.c_int]
    return cast("Callable[[int], int]", call)


def sync_filesystem(path: Path) -> None:
    """Put every file written under ``path`` on the disk with one call, instead of an fsync per
    file: Linux's syncfs on ``path``'s file system, sync(2) elsewhere. A build is committed
    by a rename only after this, so a crash cannot leave a receipt beside files the disk
    never got (SPEC §7.4)."""
    syncfs = _syncfs()
    if syncfs is None:
        if hasattr(os, "sync"):
            os.sync()
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        if syncfs(fd) != 0:
            import ctypes

            code = ctypes.get_errno()
            raise OSError(code, os.strerror(code), str(path))
    finally:
        os.close(fd)


class ReadOnlyFile(Refused, PermissionError):
    """Raised instead of replacing a file its owner made read-only (``chmod a-w``).

    A :class:`PermissionError` too, so callers that shrug off a cache they cannot write still do.
    """


def _create_private(folder: Path, name: str) -> tuple[int, Path]:
    """A new file beside the target, created with mode 0666 so that the kernel applies the
    user's umask (``mkstemp`` would make it 0600)."""
    for _ in range(100):
        tmp = folder / f".{name}.{os.urandom(6).hex()}.tmp"
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_BINARY, 0o666), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name in {folder}")


def atomic_write_bytes(
    path: Path,
    data: bytes,
    *,
    no_links_below: Path | None = None,
    durable: bool = True,
    files_only: bool = False,
) -> None:
    """Replace ``path`` with ``data`` so that a reader sees the old file or the new, never half.

    A symlink (a dotfiles manager's) is written through: its target is replaced, in the
    target's folder, and the link stays. The temporary file sits in that folder (same
    filesystem, so the rename is atomic); a new file gets the user's umask, an existing one
    keeps its mode, and a read-only one is refused (:class:`ReadOnlyFile`) and left alone.

    ``no_links_below``: a file of backendmgr's own (llama-swap's state, the service unit) that
    no one links on purpose: a symbolic link at ``path`` or at any folder between this one and
    ``path`` is refused (:class:`LinkRefused`) and whatever it points at is left untouched
    (``O_NOFOLLOW`` semantics, race-free where the system opens files relative to a folder).

    ``durable=False``: a cache. A running reader still sees the old file or the new (the rename
    stays); a crash may leave it old, empty or gone, which its reader takes as no cache, so the
    fsyncs of the file and its folder go.

    ``files_only``: a file the user names (the llama-swap config): a FIFO or socket at the path
    itself is refused too, as anything but a regular file behind a link always is; elsewhere it
    is only a name, replaced as a file is.
    """
    if no_links_below is not None:
        _write_no_follow(path, data, no_links_below, durable)
        return
    target = Path(os.path.realpath(path)) if path.is_symlink() else path
    try:  # through the links as the kernel follows them: /dev/stdout's leads to a pipe
        st = path.stat()
    except FileNotFoundError:
        mode: int | None = None
    else:
        mode = _kept_mode(st, os.access(path, os.W_OK), path, target, files_only=files_only)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = _create_private(target.parent, target.name)
    try:
        _fill(fd, data, mode, durable)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise
    if durable:
        fsync_dir(target.parent)


class LinkRefused(Refused):
    """A symbolic link where backendmgr writes a file of its own."""


class NotAFile(Refused):
    """Something other than a regular file where backendmgr would replace a file: renaming
    over it would put a file in the place of a device, a FIFO or a socket (through a link,
    even ``/dev/zero``'s)."""


_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def _only_a_name(st: os.stat_result, path: Path, target: Path) -> bool:
    """A FIFO or socket at ``path`` itself is only a name in its folder, replaced as a file
    is (a reader waiting on it is not ours to keep); behind a link, or a device (``/dev/null``
    is a name many programs share), it is refused."""
    return target == path and (stat.S_ISFIFO(st.st_mode) or stat.S_ISSOCK(st.st_mode))


def _kept_mode(
    st: os.stat_result, writable: bool, path: Path, target: Path, *, files_only: bool = False
) -> int:
    """The mode the new file keeps; :class:`ReadOnlyFile` for a file made read-only,
    :class:`NotAFile` for a device, a folder, or anything but a file behind a link (left as
    it is), and with ``files_only`` for anything but a file."""
    shown = f"{path} (a link to {target})" if target != path else str(path)
    strict = files_only or not _only_a_name(st, path, target)
    if not stat.S_ISREG(st.st_mode) and strict:
        kind = next((name for test, name in _KINDS if test(st.st_mode)), "not a regular file")
        raise NotAFile(
            f"{shown} is {kind}; backendmgr replaces only regular files and leaves it alone: "
            "remove it, or have backendmgr write elsewhere"
        )
    mode = st.st_mode & 0o7777
    if not mode & _ANY_WRITE or not writable:
        raise ReadOnlyFile(
            f"{shown} is read-only (mode {mode:04o}); backendmgr leaves it alone; "
            "make it writable (chmod u+w) to let backendmgr change it"
        )
    return mode


def _fill(fd: int, data: bytes, mode: int | None, durable: bool = True) -> None:
    """Write, keep the mode, reach the disk (when ``durable``), close."""
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
        fh.flush()
        if mode is not None and hasattr(os, "fchmod"):
            os.fchmod(fh.fileno(), mode)
        if durable:
            os.fsync(fh.fileno())


def link_refused(path: Path) -> LinkRefused:
    """The one line for a link where backendmgr keeps a file of its own."""
    return LinkRefused(
        f"{path} is a symbolic link; backendmgr writes its own files only in place, never "
        "through a link: remove the link"
    )


_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_RELATIVE = (
    bool(_NOFOLLOW and _DIRECTORY)
    and {
        os.open,
        os.mkdir,
        os.rename,
        os.stat,
        os.access,
        os.unlink,
    }
    <= os.supports_dir_fd
)


def _write_no_follow(path: Path, data: bytes, anchor: Path, durable: bool = True) -> None:
    parts = path.relative_to(anchor).parts
    if not parts:
        raise ValueError(f"{path} is the folder {anchor} itself")
    anchor.mkdir(parents=True, exist_ok=True)  # the anchor itself may be a user's link
    if not _RELATIVE:  # no openat(): check each step by its path (a race stays possible)
        here = anchor
        for part in parts:
            here = here / part
            if here.is_symlink():
                raise link_refused(here)
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(path, data, durable=durable)
        return
    folder = os.open(anchor, os.O_RDONLY | _DIRECTORY)
    try:
        here = anchor
        for part in parts[:-1]:
            here = here / part
            with contextlib.suppress(FileExistsError):
                os.mkdir(part, 0o777, dir_fd=folder)
            try:
                inner = os.open(part, os.O_RDONLY | _DIRECTORY | _NOFOLLOW, dir_fd=folder)
            except OSError as exc:
                if here.is_symlink():
                    raise link_refused(here) from None
                raise OSError(exc.errno, exc.strerror, str(here)) from None
            os.close(folder)
            folder = inner
        name = parts[-1]
        try:
            st = os.stat(name, dir_fd=folder, follow_symlinks=False)
        except FileNotFoundError:
            mode: int | None = None
        else:
            if stat.S_ISLNK(st.st_mode):
                raise link_refused(path)
            writable = os.access(name, os.W_OK, dir_fd=folder)
            mode = _kept_mode(st, writable, path, path)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW
        tmp = f".{name}.{os.urandom(6).hex()}.tmp"
        fd = os.open(tmp, flags, 0o666, dir_fd=folder)
        try:
            _fill(fd, data, mode, durable)
            # a rename replaces a link planted meanwhile, never what it points at
            os.replace(tmp, name, src_dir_fd=folder, dst_dir_fd=folder)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp, dir_fd=folder)
            raise
        if durable:
            os.fsync(folder)
    finally:
        os.close(folder)


def unlink_no_follow(path: Path, anchor: Path) -> None:
    """Remove ``path`` (a link itself, never its target), unless a folder between ``anchor``
    and it is a link: then nothing is removed."""
    here = anchor
    for part in path.relative_to(anchor).parts[:-1]:
        here = here / part
        if here.is_symlink():
            raise link_refused(here)
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


def read_regular(path: Path, cap: int, *, follow: bool = True) -> bytes:
    """At most ``cap + 1`` bytes of ``path`` (more than ``cap``: the caller's "too large").
    Anything but a regular file is an :class:`OSError`, found without blocking: a FIFO in its
    place would hang the open, ``/dev/zero`` would be read forever. ``follow`` False: a link at
    ``path`` itself is an OSError too (a marker of ours that no one links on purpose)."""
    return read_regular_stat(path, cap, follow=follow)[0]


def read_regular_stat(path: Path, cap: int, *, follow: bool = True) -> tuple[bytes, os.stat_result]:
    """:func:`read_regular`, and the status of the very file it read (its mode, its inode)."""
    with open_regular(path, follow=follow) as fh:
        return fh.read(cap + 1), os.fstat(fh.fileno())


def open_regular(path: Path, *, follow: bool = True) -> io.BufferedReader:
    """``path`` opened for reading when it is a regular file; anything else (a FIFO, whose
    open would wait for a writer, a device, a folder) is an :class:`OSError` without an
    ``errno``, found without blocking. For a file read to its end (a digest): bound its size
    where it matters."""
    flags = os.O_RDONLY | _O_BINARY | getattr(os, "O_NONBLOCK", 0)
    fd = os.open(path, flags if follow else flags | _NOFOLLOW)
    fh = os.fdopen(fd, "rb")
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path} is not a regular file")
    except BaseException:
        fh.close()
        raise
    return fh


def create_exclusive(path: Path, data: bytes) -> bool:
    """Create ``path`` with ``data``, unless something (a file, a link, even a dangling one)
    is there already: False then, and nothing is written or followed. The claim of a
    one-at-a-time operation: of two at once, exactly one creates it."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_BINARY | _NOFOLLOW
    try:
        fd = os.open(path, flags, 0o666)
    except FileExistsError:
        return False
    try:
        _fill(fd, data, None)
    except BaseException:
        path.unlink(missing_ok=True)
        raise
    return True


def remove_name(path: Path) -> None:
    """Whatever has ``path``'s name, gone: a file, a link (never its target), a FIFO, a
    folder with what it holds. Only for names in folders of backendmgr's own."""
    try:
        path.unlink(missing_ok=True)
    except IsADirectoryError:
        import shutil

        shutil.rmtree(path, ignore_errors=True)


def create_anew(path: Path, data: bytes) -> bool:
    """``path`` made anew with ``data`` (:func:`create_exclusive`) after whatever had its name
    is removed, never followed: a link whose target a write would change, a FIFO whose open
    would wait, a folder. A small file of ours that no one else writes (a note)."""
    remove_name(path)
    return create_exclusive(path, data)


def read_record_file(path: Path, cap: int, version: int, key: str) -> dict[str, Any]:
    """``key``'s mapping from one of our versioned JSON files (the verify results, the tuned
    contexts): an unreadable, oversized, foreign or other-version file reads as empty."""
    try:
        raw = read_regular(path, cap)
    except OSError:
        return {}
    if len(raw) > cap:
        return {}
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):  # not JSON, or nested deeper than Python parses
        return {}
    if not isinstance(data, dict) or data.get("version") != version:
        return {}
    found = data.get(key)
    return {k: v for k, v in found.items() if isinstance(k, str)} if isinstance(found, dict) else {}


def apply_umask(folder: Path) -> None:
    """Give a folder made by ``mkdtemp`` (always 0700) the mode a plain ``mkdir`` would have.

    The umask is read by letting the kernel apply it to a probe folder, since ``os.umask``
    can only be read by changing it, which races with other threads.
    """
    probe = folder / f".umask-{os.urandom(4).hex()}"
    os.mkdir(probe, 0o777)
    try:
        mode = stat.S_IMODE(probe.stat().st_mode)
    finally:
        probe.rmdir()
    folder.chmod(mode)


_TEMP_TAIL = 12 + len(".tmp")  # what _create_private and the in-place write add to the name
STALE_S = 60.0
"""How old a temporary file is before it counts as left behind: a live write renames its own
within milliseconds, and a writer this lock does not exclude (another data home writing the
same output, a cache refreshed by a read) must not lose its file."""


def leftover_temps(*paths: Path, now: float | None = None) -> list[Path]:
    """The temporary files that atomic writes of ``paths`` left when killed before their own
    rename or clean-up: ``.NAME.<12 hex digits>.tmp`` beside the file each path resolves to,
    untouched for :data:`STALE_S`. Nothing else is ever named so; a folder that cannot be read
    has none to tell."""
    import time

    before = (time.time() if now is None else now) - STALE_S
    prefixes: dict[Path, list[str]] = {}  # by folder: each read once (the config's holds two)
    for path in paths:
        real = Path(os.path.realpath(path))
        prefixes.setdefault(real.parent, []).append(f".{real.name}.")
    found: list[Path] = []
    for folder, starts in prefixes.items():
        try:
            with os.scandir(folder) as entries:
                names = [e.name for e in entries if e.name.startswith(tuple(starts))]
        except OSError:
            continue
        for name in names:
            if not any(_temp_of(name, start) for start in starts):
                continue
            with contextlib.suppress(OSError):  # gone meanwhile: its write ended
                st = (folder / name).lstat()
                if stat.S_ISREG(st.st_mode) and st.st_mtime < before:
                    found.append(folder / name)
    return sorted(found)


def _temp_of(name: str, start: str) -> bool:
    """Whether ``name`` is ``start`` + 12 hex digits + ``.tmp``, as the writes name theirs."""
    tail = name[len(start) :]
    return (
        name.startswith(start)
        and len(tail) == _TEMP_TAIL
        and tail.endswith(".tmp")
        and _is_hex(tail[:12])
    )


def _is_hex(text: str) -> bool:
    return all(ch in "0123456789abcdef" for ch in text)


def remove_leftover_temps(*paths: Path) -> list[Path]:
    """Remove :func:`leftover_temps` (a link among them is removed, never followed): only
    under the lock every writer of these files holds, or a live write would lose its file."""
    removed = []
    for tmp in leftover_temps(*paths):
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
            removed.append(tmp)
    return removed


def folder_for(path: Path, what: str) -> None:
    """Make ``path``'s folder (and those above it) for ``what`` to be written there; a file
    where a folder must be is said as such, not as the kernel's "File exists"."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError) as exc:
        blocking = next(
            (p for p in (path.parent, *path.parent.parents) if p.exists() and not p.is_dir()),
            Path(exc.filename or path.parent),
        )
        raise NotAFile(
            f"{blocking} is a file, not a folder: {what} {path} cannot be written under it; "
            "move that file, or choose another place"
        ) from None
