"""Start-up cost: the paths run at every prompt and <TAB> load no heavy library (issue 14)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.startup import loaded_after


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
