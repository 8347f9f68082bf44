"""Start-up cost: the paths run at every prompt and <TAB> load no heavy library (issue 14)."""

from __future__ import annotations

import subprocess
import sys

import pytest

HEAVY = ("pydantic", "rich", "httpx", "anyio", "ruamel.yaml", "filelock")


def loaded_after(*argv: str) -> tuple[str, list[str]]:
    """Run ``main(argv)`` in a fresh interpreter; its stdout and the heavy modules it loaded."""
    code = (
        "import sys\n"
        "from backendmgr.cli.main import main\n"
        "try:\n"
        f"    main({list(argv)!r})\n"
        "except SystemExit:\n"
        "    pass\n"
        f"print('LOADED', *[m for m in {HEAVY!r} if m in sys.modules])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    out, _, loaded = done.stdout.rpartition("LOADED")
    return out, loaded.split()


@pytest.mark.parametrize("argv", [("--help",), ("__complete", "--", "ins")])
def test_prompt_paths_load_no_heavy_library(argv: tuple[str, ...]) -> None:
    out, loaded = loaded_after(*argv)
    assert loaded == []
    assert "install" in out


def test_completing_an_id_still_reads_local_state() -> None:
    out, loaded = loaded_after("__complete", "--", "install", "")
    assert "llama-server" in out.split()  # from the catalog, through the Manager
    assert "pydantic" in loaded
