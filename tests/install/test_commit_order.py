"""The downloaded archive is deleted before the commit's file-system sync (issue 34): the sync
would otherwise write its pages to the disk only for them to be freed, as many bytes again as
the build's (about 45 ms per 100 MiB here)."""

from __future__ import annotations

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
