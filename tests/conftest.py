from __future__ import annotations

import io
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _find_shared() -> Path:
    """``shared/`` beside the checkout; for a local clone, beside the repository it came from."""
    candidates = [ROOT.parent / "shared"]
    origin = subprocess.run(
        ["git", "-C", str(ROOT), "config", "remote.origin.url"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    if origin and "://" not in origin and Path(origin).is_dir():
        candidates.append(Path(origin).resolve().parent / "shared")
    for candidate in candidates:
        if (candidate / "llama-swap" / "config-schema.json").is_file():
            return candidate
    return candidates[0]  # tests that need it fail with the path they looked for


SHARED = _find_shared()


@dataclass
class CliResult:
    code: int
    out: str
    err: str


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
def cli(monkeypatch: pytest.MonkeyPatch) -> Callable[..., CliResult]:
    """Run ``backendmgr ARGS`` in this process, capturing what it prints."""
    from backendmgr.cli import main as cli_main

    def run(*args: str) -> CliResult:
        out, err = io.StringIO(), io.StringIO()
        monkeypatch.setattr(sys, "stdout", out)
        monkeypatch.setattr(sys, "stderr", err)
        try:
            code = cli_main.main(list(args))
        except SystemExit as exc:
            code = int(exc.code or 0)
        finally:
            monkeypatch.setattr(sys, "stdout", sys.__stdout__)
            monkeypatch.setattr(sys, "stderr", sys.__stderr__)
        return CliResult(code, out.getvalue(), err.getvalue())

    return run


def run_backendmgr(
    *args: str, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """Run the real console entry point in a child process."""
    return subprocess.run(
        [sys.executable, "-m", "backendmgr", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=timeout,
        check=False,
    )


@pytest.fixture
def mirror_root(tmp_path: Path) -> Path:
    root = tmp_path / "mirror"
    root.mkdir()
    return root


@pytest.fixture
def mirror(mirror_root: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[object]:
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
