"""What failed and killed installs leave behind, and ``doctor --fix`` through the real CLI:
part files are listed and removed (unless an install holds them), and a reinstall killed
inside its rename swap is finished rather than deleted."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from backendmgr.config.paths import Paths
from backendmgr.install.builds import BuildStore
from backendmgr.install.store import RECEIPT
from backendmgr.mirror import MirrorServer
from tests.support import publish_llama
from tests.support.cli import Cli, run_backendmgr


def installed_build(cli: Cli, mirror_root: Path, home: Path) -> Path:
    publish_llama(mirror_root, "b100")
    result = cli("install", "llama-server", "b100")
    assert result.code == 0, result
    return home / "builds" / "llama-server" / "b100-vulkan"


def runs(build: Path) -> str:
    exe = build / "build" / "bin" / "llama-server"
    return subprocess.run([exe], capture_output=True, text=True, check=True, timeout=20).stdout


def scratch(build: Path) -> list[str]:
    return sorted(p.name for p in build.parent.iterdir() if p.name != build.name)


def test_failed_smoke_check_leaves_no_part_file(
    cli: Cli, mirror: MirrorServer, mirror_root: Path, tmp_path: Path
) -> None:
    publish_llama(mirror_root, "b100", fail=True)
    assert cli("install", "llama-server").code == 1
    assert list((tmp_path / "home" / "downloads").glob("*")) == []


def test_doctor_lists_part_files_and_fix_removes_free_ones(
    cli: Cli, mirror: MirrorServer, mirror_root: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    installed_build(cli, mirror_root, home)
    downloads = home / "downloads"
    loose = downloads / "0123456789abcdef-llama-b200-bin-ubuntu-vulkan-x64.tar.gz.part"
    busy = downloads / "fedcba9876543210-llama-b300-bin-ubuntu-vulkan-x64.tar.gz.part"
    loose.write_bytes(b"\0" * (3 << 19))  # 1.5 MiB, as an interrupted download leaves it
    loose.with_name(loose.name + ".json").write_text('{"etag": "x"}')
    busy.write_bytes(b"\0" * 10)

    report = cli("doctor")
    assert report.code == 0, report
    assert (
        f"warning: partial download {loose} (1.5 MiB) is kept to resume the next install of "
        "that build; doctor --fix removes it"
    ) in report.err.splitlines()
    assert str(busy) in report.err

    store = BuildStore(Paths.resolve(config=None, home=str(home)))
    with store.part_lock(busy).acquire(timeout=0):  # an install is reading it right now
        fixed = cli("--json", "doctor", "--fix")
    assert fixed.code == 0, fixed
    assert json.loads(fixed.out)["fixed"] == [f"removed partial download {loose}"]
    assert not loose.exists() and not loose.with_name(loose.name + ".json").exists()
    assert busy.exists()
    assert str(loose) not in cli("doctor").err


def test_a_running_install_s_folders_are_its_own_not_leftovers(
    cli: Cli, mirror: MirrorServer, mirror_root: Path, tmp_path: Path
) -> None:
    """``doctor`` while an install runs: its staging folder and part file are notes (its lock
    is held), not "leftover … (doctor --fix removes it)" errors that --fix then keeps; once
    nothing holds them, they are leftovers again."""
    home = tmp_path / "home"
    build = installed_build(cli, mirror_root, home)
    staging = build.with_name("b200-vulkan.staging-l1v3")
    staging.mkdir()
    part = home / "downloads" / "0123456789abcdef-llama-b200-bin-ubuntu-vulkan-x64.tar.gz.part"
    part.parent.mkdir(exist_ok=True)
    part.write_bytes(b"\0" * 10)
    store = BuildStore(Paths.resolve(config=None, home=str(home)))
    with (
        store.lock("llama-server", "b200", "vulkan").acquire(timeout=0),
        store.part_lock(part).acquire(timeout=0),
    ):
        for args in (["doctor"], ["doctor", "--fix"]):
            report = cli(*args)
            assert report.code == 0, report
            assert f"{staging} belongs to an install or removal that is running" in report.err
            assert f"{part} belongs to a download that is running" in report.err
            assert "leftover folder" not in report.err
        assert staging.is_dir() and part.exists()
    report = cli("doctor")
    assert report.code == 1 and f"leftover folder {staging} (doctor --fix removes it)" in report.err


def _kill_inside_swap(build: Path, *, new_complete: bool, second_rename_done: bool) -> None:
    """Lay out the disk as BuildStore.commit leaves it when killed during a reinstall: the new
    build is staged with its receipt, the old one was renamed to ``.swap-*/old``."""
    staging = build.parent / f"{build.name}.staging-k1ll3d"
    shutil.copytree(build, staging, symlinks=True)
    (staging / "NEW").write_text("the reinstalled copy")
    if not new_complete:
        (staging / RECEIPT).unlink()
    swap = build.parent / f"{build.name}.swap-k1ll3d"
    swap.mkdir()
    os.replace(build, swap / "old")
    if second_rename_done:
        os.replace(staging, build)


@pytest.mark.parametrize(
    ("new_complete", "second_rename_done", "expect_new"),
    [(True, False, True), (False, False, False), (True, True, True)],
    ids=["between-renames", "new-copy-incomplete", "after-second-rename"],
)
def test_doctor_fix_finishes_a_swap_killed_midway(
    cli: Cli,
    mirror: MirrorServer,
    mirror_root: Path,
    tmp_path: Path,
    new_complete: bool,
    second_rename_done: bool,
    expect_new: bool,
) -> None:
    home = tmp_path / "home"
    build = installed_build(cli, mirror_root, home)
    _kill_inside_swap(build, new_complete=new_complete, second_rename_done=second_rename_done)

    before = cli("doctor")
    assert before.code == 1
    swap = build.parent / f"{build.name}.swap-k1ll3d"
    assert f"error: interrupted reinstall {swap} (doctor --fix finishes it)" in before.err
    fixed = cli("doctor", "--fix")
    assert fixed.code == 0, fixed
    assert "Traceback" not in fixed.err

    assert build.is_dir() and scratch(build) == []
    assert (build / "NEW").exists() is expect_new
    assert runs(build) == "version: 100 (b100)\n"
    listed = json.loads(cli("--json", "list").out)
    assert [(b["id"], b["activated"]) for b in listed] == [("llama-server@b100-vulkan", True)]
    assert cli("doctor").code == 0


def test_commit_puts_the_staged_files_on_disk_before_the_receipt(
    cli: Cli,
    mirror: MirrorServer,
    mirror_root: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One file-system sync per install (no fsync per file), before the receipt exists: a
    crash then never leaves a receipt beside files the disk did not get (SPEC §7.4)."""
    import backendmgr.install.store as store_module

    seen: list[tuple[str, bool, bool]] = []
    real = store_module.sync_filesystem

    def recording(path: Path) -> None:
        exe = path / "build" / "bin" / "llama-server"
        seen.append((path.name, (path / RECEIPT).exists(), exe.is_file()))
        real(path)  # the real call, on the real staging folder

    monkeypatch.setattr(store_module, "sync_filesystem", recording)
    build = installed_build(cli, mirror_root, tmp_path / "home")
    assert [(".staging-" in name, receipt, exe) for name, receipt, exe in seen] == [
        (True, False, True)
    ]
    assert (build / RECEIPT).is_file()


def test_sync_filesystem_reports_a_missing_folder(tmp_path: Path) -> None:
    from backendmgr._fs import sync_filesystem

    sync_filesystem(tmp_path)
    with pytest.raises(OSError):
        sync_filesystem(tmp_path / "gone")


def test_a_receipt_is_read_strictly_but_a_later_backendmgrs_keys_are_ignored(
    cli: Cli, mirror: MirrorServer, mirror_root: Path, tmp_path: Path
) -> None:
    """Issue 30: receipts are read back without pydantic. A key this backendmgr does not know
    (a later one wrote it) leaves the build installed; a receipt that is not one (not JSON, a
    list, a field missing or of the wrong type) makes the folder a leftover, not a build."""
    home = tmp_path / "home"
    build = installed_build(cli, mirror_root, home)
    store = BuildStore(Paths.resolve(config=None, home=str(home)))
    good = json.loads((build / RECEIPT).read_text())
    later = {**good, "signed_by": "x", "assets": [{**a, "mirror": "y"} for a in good["assets"]]}
    (build / RECEIPT).write_text(json.dumps(later))
    receipt = store.read_receipt(build)
    assert receipt is not None and receipt.assets[0].sha256 == good["assets"][0]["sha256"]
    assert receipt.installed.tzinfo is not None  # the time as it was written
    listed = json.loads(cli("--json", "list").out)
    assert [b["id"] for b in listed] == ["llama-server@b100-vulkan"]
    broken = [
        "{",
        "[]",
        json.dumps({k: v for k, v in good.items() if k != "exe"}),
        json.dumps({**good, "size_bytes": "12"}),
        json.dumps({**good, "installed_at": "yesterday"}),
        json.dumps({**good, "assets": [{**good["assets"][0], "verified_by": "trust"}]}),
        # these once read as builds: a size ``list`` failed to print (OverflowError), a
        # negative size, an executable outside the build folder
        json.dumps(good).replace(
            f'"size_bytes": {good["size_bytes"]}', '"size_bytes": 1' + "0" * 4000
        ),
        json.dumps({**good, "size_bytes": -1}),
        json.dumps({**good, "exe": "../../../../bin/sh"}),
        json.dumps({**good, "exe": "/bin/sh"}),
        json.dumps({**good, "assets": [{**good["assets"][0], "size": -5}]}),
    ]
    for text in broken:
        (build / RECEIPT).write_text(text)
        assert store.read_receipt(build) is None, text
        assert store.leftovers() == [build]
    assert json.loads(cli("--json", "list").out) == []
    assert cli("list").code == 0
    (build / RECEIPT).unlink()
    os.mkfifo(build / RECEIPT)  # once waited on for ever by every read that lists builds
    listed = run_backendmgr("--json", "list", env={"BACKENDMGR_HOME": str(home)}, timeout=30)
    assert (listed.returncode, json.loads(listed.stdout)) == (0, [])
