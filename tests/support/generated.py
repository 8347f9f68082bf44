"""The generated llama-swap file beside a test's config, read back as data."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ruamel.yaml import YAML


def output(config_path: Path) -> Path:
    return config_path.parent / "llama-swap.yaml"


def load(config_path: Path) -> dict[str, Any]:
    data = YAML(typ="safe").load(output(config_path).read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data
