"""The build store's writing half: where builds are staged, committed and removed, and how
leftovers are tidied (SPEC §7.4 to §7.7). :class:`.builds.BuildStore` is the store every
service holds; its writing methods call the functions here, so reads never load this module
(nor tempfile, shutil or file locks).

A build is "installed" exactly when its folder holds a valid receipt. Archive builds are
unpacked, and venv builds are made, in ``<final>.staging-<random>`` and renamed into place with
the receipt already inside. A crash leaves the old state or the new one, and listing never shows
a half-made build.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import struct
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from filelock import FileLock, Timeout

from .._fs import apply_umask, atomic_write_bytes, fsync_dir, sanitize_segment, sync_filesystem
from . import stages
from .receipt import RECEIPT, AssetRecord, InstalledEntry, Receipt, receipt_json

if TYPE_CHECKING:  # the store calls in here; this module never imports it
    from .builds import BuildStore

__all__ = [
    "RECEIPT",
    "AssetRecord",
    "InstalledEntry",
    "Receipt",
    "folder_size",
    "place_apart",
    "receipt_json",
]


def folder_size(path: Path) -> int:
    total = 0
    for folder, _, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(folder, name)).st_size
    return total


def build_lock(store: BuildStore, component: str, version: str, variant: str) -> FileLock:
    """The lock installs and removals of one build take (a read lists unlocked)."""
    store.paths.locks.mkdir(parents=True, exist_ok=True)
    final = store.build_dir(component, version, variant)
    return FileLock(store.lock_path(sanitize_segment(component), final.name))


def part_lock(store: BuildStore, part: Path) -> FileLock:
    store.paths.locks.mkdir(parents=True, exist_ok=True)
    return FileLock(store.paths.locks / f"download@{part.name}.lock")


# Linux's inode flag for "the top of a directory hierarchy" (chattr +T), and the ioctls that
# read and set a file's flags: _IOR('f', 1, long) and _IOW('f', 2, long)
_FS_TOPDIR_FL = 0x00020000
_FS_IOC_GETFLAGS = 0x80006601 | struct.calcsize("l") << 16
_FS_IOC_SETFLAGS = 0x40006602 | struct.calcsize("l") << 16


def place_apart(folder: Path) -> None:
    """Mark ``folder`` as holding unrelated hierarchies (``chattr +T``): ext4's Orlov
    allocator then places each new folder in it (a build's staging folder) in a block group
    of its own, with room, instead of beside its siblings. Without a journal, ext4 will not
    reuse an inode deleted in the last seconds (minutes while its table is unwritten) and
    reads past each such one to create a file: in the group where earlier builds and their
    stagings were removed, a file of a 405-file build cost ~0.3 ms of CPU to create, in a
    fresh group ~0.02 ms. A hint only: elsewhere (another file system, no permission) the
    folders are placed as before."""
    if not sys.platform.startswith("linux"):
        return
    import fcntl

    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        got = fcntl.ioctl(fd, _FS_IOC_GETFLAGS, bytes(4))
        flags = struct.unpack("i", got)[0]
        if not flags & _FS_TOPDIR_FL:
            fcntl.ioctl(fd, _FS_IOC_SETFLAGS, struct.pack("i", flags | _FS_TOPDIR_FL))
    except OSError:
        pass
    finally:
        os.close(fd)


def new_staging(final: Path) -> Path:
    final.parent.mkdir(parents=True, exist_ok=True)
    place_apart(final.parent)
    staging = Path(tempfile.mkdtemp(prefix=f"{final.name}.staging-", dir=final.parent))
    apply_umask(staging)  # the committed build gets the mode a plain mkdir would give
    return staging


def write_receipt(folder: Path, receipt: Receipt) -> None:
    """The receipt, replacing whatever had its name and never written through a link: the
    build folder is ours, and an archive's link there once made the receipt overwrite the
    executable it pointed at."""
    atomic_write_bytes(folder / RECEIPT, receipt_json(receipt).encode(), no_links_below=folder)


def commit(staging: Path, final: Path, receipt: Receipt) -> None:
    """Receipt into staging, then one rename; an old build is swapped aside, then deleted.

    The old build waits in ``<final>.swap-*/old`` (not ``.trash-``) so that after a kill
    between the two renames ``doctor --fix`` can tell a swap to finish from a removal.
    The staged files reach the disk first, with one call for them all (no fsync per
    file): the receipt, fsynced, and the rename then only ever name a complete build."""
    with stages.timed("syncfs"):  # the disk's own work: what of the build is not written yet
        sync_filesystem(staging)
    write_receipt(staging, receipt)
    trash: Path | None = None
    if final.exists():
        trash = Path(tempfile.mkdtemp(prefix=f"{final.name}.swap-", dir=final.parent))
        os.replace(final, trash / "old")
    try:
        os.replace(staging, final)
    except BaseException:
        if trash is not None and not final.exists():
            os.replace(trash / "old", final)
        raise
    fsync_dir(final.parent)
    if trash is not None:
        shutil.rmtree(trash, ignore_errors=True)


def remove(entry: InstalledEntry) -> None:
    """Rename aside first so that a crash mid-delete never leaves a half build listed."""
    trash = Path(tempfile.mkdtemp(prefix=f"{entry.dir.name}.trash-", dir=entry.dir.parent))
    os.replace(entry.dir, trash / "old")
    fsync_dir(entry.dir.parent)
    shutil.rmtree(trash, ignore_errors=True)


def _finish_swap(store: BuildStore, final: Path, scratch: list[Path]) -> Path | None:
    """After a kill inside a commit the build folder may be missing while complete copies
    wait beside it: the committed new build (a staging folder holding a receipt, written
    only once the build passed every check) wins, else the old one in ``.swap-*/old``."""
    if store.read_receipt(final) is not None:
        return None
    new = [f for f in scratch if ".staging-" in f.name and store.read_receipt(f) is not None]
    old = [
        f / "old"
        for f in scratch
        if ".swap-" in f.name and store.read_receipt(f / "old") is not None
    ]
    candidates = new or old
    if not candidates:
        return None
    candidates.sort(key=lambda f: f.stat().st_mtime, reverse=True)  # two kills: the last
    if final.is_dir():  # a folder without a valid receipt: never a build (§7.4)
        shutil.rmtree(final)
    os.replace(candidates[0], final)
    fsync_dir(final.parent)
    return final


def tidy(
    store: BuildStore, groups: dict[tuple[Path, str], list[Path]]
) -> tuple[list[Path], list[Path]]:
    """Finish interrupted swaps, then delete leftovers (``groups``: by component folder and
    the build folder they belong to) whose build lock is free (an install in progress keeps
    its own). Returns the builds restored and the folders removed."""
    restored_all: list[Path] = []
    changed: list[Path] = []
    store.paths.locks.mkdir(parents=True, exist_ok=True)
    for (comp_dir, base), folders in groups.items():
        try:
            with FileLock(store.lock_path(comp_dir.name, base)).acquire(timeout=0):
                restored = _finish_swap(store, comp_dir / base, folders)
                if restored is not None:
                    restored_all.append(restored)
                for folder in folders:
                    if folder.exists() and folder != restored:
                        shutil.rmtree(folder, ignore_errors=True)
                        changed.append(folder)
        except Timeout:
            continue
    return restored_all, changed


def remove_part_files(store: BuildStore) -> list[Path]:
    """Delete part files (and their ETag notes) that no running install holds."""
    from .download import discard  # a cleaning command's: loads httpx, which reads never need

    removed: list[Path] = []
    for part in store.part_files():
        try:
            with part_lock(store, part).acquire(timeout=0):
                discard(part)  # a folder or link by that name included
                removed.append(part)
        except Timeout:
            continue
    return removed
