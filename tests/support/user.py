"""A user's machine as the API, Manager and smoke tests start from it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tests.support.ggufs import write_gguf


@dataclass
class Setup:
    home: Path
    config: Path
    output: Path  # the generated llama-swap config (``generate`` may report another path)
    models: Path
    manual_exe: Path

    def snapshot(self) -> tuple[bytes, bytes]:
        """The user's config and the generated output, byte for byte."""
        return self.config.read_bytes(), self.output.read_bytes()


def user_setup(tmp_path: Path, config_path: Path) -> tuple[Path, Path]:
    """A user's config as the API tests start from: a commented file with one hand-made llama
    row (a stand-in that prints a version) and a models folder holding one real GGUF header.
    Returns (models folder, the row's executable)."""
    models = tmp_path / "models"
    write_gguf(models / "qwen3-8b-q4_k_m.gguf", "qwen3", layers=36, ctx=40960)
    manual = tmp_path / "opt" / "llama-server"
    manual.parent.mkdir(parents=True)
    manual.write_text("#!/bin/sh\necho 'version: 1 (b1)'\n")
    manual.chmod(0o755)
    config_path.parent.mkdir(parents=True, exist_ok=True)
    config_path.write_text(
        "# my setup\n"
        f"models_dirs: [{models}]\n"
        "backends:\n"
        "  - id: llama-src   # built from source\n"
        "    kind: llama\n"
        f"    path: {manual}\n"
    )
    return models, manual
