from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.cli import CliResult
from tests.support.swap import SWAP_BIN, model_setup, ok, release_assets


@pytest.fixture(scope="session")
def swap_release() -> dict[str, bytes]:
    """The packed release, built once per run (the binary is 18 MB)."""
    if not SWAP_BIN.is_file():
        pytest.skip(f"the real llama-swap is not at {SWAP_BIN}")
    return release_assets()


@pytest.fixture(autouse=True)
def _own_service_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``service install`` writes below XDG_CONFIG_HOME: never the real user's."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))


@pytest.fixture(scope="session")
def swap_build(swap_release: dict[str, bytes], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """llama-swap installed once per run through the real CLI from a loopback mirror; tests
    copy the build into their own home (an install costs seconds, a copy does not)."""
    import os

    from backendmgr.mirror import MirrorServer
    from tests.support.cli import run_backendmgr
    from tests.support.swap import publish_swap

    root = tmp_path_factory.mktemp("swap-mirror")
    publish_swap(root, swap_release)
    work = tmp_path_factory.mktemp("swap-install")
    server = MirrorServer(root).start()
    try:
        env = {k: v for k, v in os.environ.items() if not k.startswith("BACKENDMGR_")}
        env |= {
            "BACKENDMGR_CONFIG": str(work / "config.yaml"),
            "BACKENDMGR_HOME": str(work / "home"),
            "BACKENDMGR_GITHUB_API": server.base_url,
            "BACKENDMGR_GPU": "none",
        }
        done = run_backendmgr("install", "llama-swap", env=env, timeout=300)
    finally:
        server.stop()
    assert done.returncode == 0, done.stderr
    return work / "home" / "builds" / "llama-swap"


@pytest.fixture
def with_swap(swap_build: Path, tmp_path: Path) -> Path:
    """This test's home holds the installed llama-swap; the next command adopts and activates
    it (a missing managed row is created for the newest build)."""
    import shutil

    target = tmp_path / "home" / "builds" / "llama-swap"
    shutil.copytree(swap_build, target, symlinks=True)
    return target


@pytest.fixture
def installed(
    tmp_path: Path,
    config_path: Path,
    with_swap: Path,
    cli: Callable[..., CliResult],
    monkeypatch: pytest.MonkeyPatch,
) -> dict[str, Path]:
    """Models served by the stand-in, llama-swap activated; the stand-in notes its pids."""
    paths = model_setup(tmp_path, config_path)
    fake = tmp_path / "fake"
    fake.mkdir()
    monkeypatch.setenv("FAKE_DIR", str(fake))  # the stand-in notes its pids there
    ok(cli("activate", "llama-swap@v250-any"))
    return {**paths, "fake": fake, "home": tmp_path / "home"}
