"""Start-up cost: the paths run at every prompt and <TAB> load no heavy library (issue 14)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

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


def test_completing_a_component_reads_the_manifests_without_the_manager(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``install <TAB>``: every manifest's id, the user's too, with no pydantic (the catalog
    validates them when a command runs); a broken manifest is left out, not an error."""
    user = tmp_path / "cfg" / "manifests"  # beside the config file
    user.mkdir(parents=True)
    (user / "mine.yaml").write_text("id: my-server\nkind: llama\n")
    (user / "broken.yaml").write_text("id: [unclosed\n")
    monkeypatch.setenv("BACKENDMGR_CONFIG", str(tmp_path / "cfg" / "config.yaml"))
    out, loaded = loaded_after("__complete", "--", "install", "")
    assert out.split() == [
        "llama-server",
        "llama-swap",
        "sd-server",
        "upscaler",
        "vllm",
        "my-server",
    ]
    assert "pydantic" not in loaded
    assert loaded_after("__complete", "--", "install", "my")[0].split() == ["my-server"]


def test_completing_a_build_still_reads_local_state() -> None:
    out, loaded = loaded_after("__complete", "--", "activate", "")
    assert out.split() == []  # nothing installed in this fresh home
    assert "pydantic" in loaded  # receipts are validated through the Manager
