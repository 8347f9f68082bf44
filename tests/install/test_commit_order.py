"""The downloaded archive is deleted before the commit's file-system sync (issue 34): the sync
would otherwise write its pages to the disk only for them to be freed, as many bytes again as
the build's (about 45 ms per 100 MiB here)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from backendmgr.install.store import RECEIPT
from backendmgr.mirror import MirrorServer
from tests.support import publish_llama
from tests.support.cli import Cli


def test_the_part_files_are_gone_when_the_staged_build_is_synced(
    cli: Cli,
    mirror: MirrorServer,
    mirror_root: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import backendmgr.install.store as store_module

    downloads = tmp_path / "home" / "downloads"
    seen: list[tuple[list[str], bool]] = []
    real = store_module.sync_filesystem

    def recording(path: Path) -> None:
        left = sorted(p.name for p in downloads.iterdir()) if downloads.is_dir() else []
        seen.append((left, (path / RECEIPT).exists()))
        real(path)

    monkeypatch.setattr(store_module, "sync_filesystem", recording)
    publish_llama(mirror_root, "b100")
    result = cli("install", "llama-server", "b100")
    assert result.code == 0, result
    assert seen == [([], False)]  # no .part (nor its .json) left, and no receipt yet
    build = tmp_path / "home" / "builds" / "llama-server" / "b100-vulkan"
    assert (build / RECEIPT).is_file()


def _inode_flags(folder: Path, add: int = 0) -> int | None:
    """The folder's inode flags (``lsattr``), after adding ``add`` to them (``chattr +``),
    or None where the file system keeps none, or refuses those."""
    import fcntl
    import os
    import struct

    from backendmgr.install.store import _FS_IOC_GETFLAGS, _FS_IOC_SETFLAGS

    fd = os.open(folder, os.O_RDONLY)
    try:
        flags = int(struct.unpack("i", fcntl.ioctl(fd, _FS_IOC_GETFLAGS, bytes(4)))[0])
        if add:
            fcntl.ioctl(fd, _FS_IOC_SETFLAGS, struct.pack("i", flags | add))
            return _inode_flags(folder)
        return flags
    except OSError:
        return None
    finally:
        os.close(fd)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux inode flags")
def test_a_staging_folder_is_placed_apart_from_its_siblings(tmp_path: Path) -> None:
    """The component's folder is marked as holding unrelated hierarchies (``chattr +T``) where
    the file system keeps the flag, so that each staging folder starts in a block group of
    its own; the staging folder itself is not (its build's folders stay beside it)."""
    from backendmgr.install.store import _FS_TOPDIR_FL, new_staging

    final = tmp_path / "builds" / "tool" / "v1-cpu"
    staging = new_staging(final)
    assert staging.parent == final.parent and staging.is_dir()
    (tmp_path / "probe").mkdir()
    if not (_inode_flags(tmp_path / "probe", add=_FS_TOPDIR_FL) or 0) & _FS_TOPDIR_FL:
        pytest.skip("this file system keeps no top-of-hierarchy flag (ext4 does)")
    assert (_inode_flags(final.parent) or 0) & _FS_TOPDIR_FL
    assert not (_inode_flags(staging) or 0) & _FS_TOPDIR_FL
    assert new_staging(final) != staging  # a second one, the flag already there
