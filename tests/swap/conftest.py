from __future__ import annotations

from pathlib import Path

import pytest

from tests.swap.helpers import SWAP_BIN, release_assets


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
