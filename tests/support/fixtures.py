"""The fixtures every test may use; ``tests/conftest.py`` registers them."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.support.cli import Cli, run_in_process
from tests.support.user import Setup, user_setup

if TYPE_CHECKING:
    from backendmgr.mirror import MirrorServer


@pytest.fixture(autouse=True)
def _isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No test reads the real user's config, home, GPU or network settings."""
    for name in list(os.environ):
        if name.startswith("BACKENDMGR_") or name in ("GITHUB_TOKEN", "GH_TOKEN"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("BACKENDMGR_CONFIG", str(tmp_path / "cfg" / "config.yaml"))
    monkeypatch.setenv("BACKENDMGR_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("BACKENDMGR_GPU", "none")
    monkeypatch.setenv("BACKENDMGR_OFFLINE", "1")
    yield


@pytest.fixture
def config_path(tmp_path: Path) -> Path:
    return tmp_path / "cfg" / "config.yaml"


@pytest.fixture
def cli() -> Cli:
    """Run ``backendmgr ARGS`` in this process, capturing what it prints."""
    return run_in_process


@pytest.fixture
def mirror_root(tmp_path: Path) -> Path:
    root = tmp_path / "mirror"
    root.mkdir()
    return root


@pytest.fixture
def mirror(mirror_root: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[MirrorServer]:
    """A real HTTP server on 127.0.0.1 speaking the GitHub releases API over ``mirror_root``."""
    from backendmgr.mirror import MirrorServer

    server = MirrorServer(mirror_root).start()
    monkeypatch.setenv("BACKENDMGR_GITHUB_API", server.base_url)
    monkeypatch.delenv("BACKENDMGR_OFFLINE", raising=False)
    monkeypatch.setenv("BACKENDMGR_GPU", "AMD Radeon RX 7900 XTX")  # → vulkan
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def setup(tmp_path: Path, config_path: Path, monkeypatch: pytest.MonkeyPatch) -> Setup:
    """A user's config with a hand-made row and a models folder (``user_setup``), 24 GB of
    VRAM, and where its generated output goes."""
    monkeypatch.setenv("BACKENDMGR_VRAM_GB", "24")
    models, manual = user_setup(tmp_path, config_path)
    home = tmp_path / "home"
    return Setup(home, config_path, home / "llama-swap.yaml", models, manual)


def pytest_configure(config: pytest.Config) -> None:
    """Ctrl-C tests signal the children they start. A shell starts a background job with SIGINT
    ignored, and an ignored signal stays ignored across exec, so a suite run that way would
    hand its children a deaf Ctrl-C; a handled one is reset to the default in them."""
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test marked slow says why: ``@pytest.mark.slow(reason="...")``."""
    for item in items:
        for mark in item.iter_markers("slow"):
            if not str(mark.kwargs.get("reason", "")).strip():
                raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.slow needs reason=")
