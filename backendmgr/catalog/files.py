"""Where manifests live, and their ids read without validating them: shell completion lists
component ids at every <TAB>, and must not pay for pydantic and the whole catalog."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from .._yaml import load_yaml, read_limited
from ..config.locate import builtin_manifest_dir

__all__ = ["builtin_manifest_dir", "component_ids", "manifest_files", "variant_ids"]


def manifest_files(user_dir: Path | None = None, builtin_dir: Path | None = None) -> list[Path]:
    """The built-in manifests, then the user's, in the order the catalog loads them."""
    folders = [builtin_dir or builtin_manifest_dir()]
    if user_dir is not None and user_dir.is_dir():
        folders.append(user_dir)
    return [
        path
        for folder in folders
        for path in sorted(folder.glob("*.yaml")) + sorted(folder.glob("*.yml"))
    ]


def _manifests(user_dir: Path | None) -> list[dict[str, Any]]:
    """Each manifest with a string ``id``, as written; a file that cannot be read is left out
    rather than failing a completion."""
    found: list[dict[str, Any]] = []
    for path in manifest_files(user_dir):
        with contextlib.suppress(Exception):
            data = load_yaml(read_limited(path).decode("utf-8"), f"manifest {path}")
            if isinstance(data, dict) and isinstance(data.get("id"), str):
                found.append(data)
    return found


def component_ids(user_dir: Path | None = None) -> list[str]:
    """Each manifest's ``id`` as written (the catalog validates them when it loads)."""
    return list(dict.fromkeys(data["id"] for data in _manifests(user_dir)))


def variant_ids(component: str | None, user_dir: Path | None = None) -> list[str]:
    """The variant ids ``component``'s manifest lists (every manifest's for ``None`` or an
    unknown one), as written: ``install COMPONENT --variant <TAB>``."""
    manifests = _manifests(user_dir)
    chosen = [m for m in manifests if m["id"] == component][:1] or manifests
    ids: list[str] = []
    for data in chosen:
        variants = data.get("variants")
        for variant in variants if isinstance(variants, list) else []:
            if isinstance(variant, dict) and isinstance(variant.get("id"), str):
                ids.append(variant["id"])
    return list(dict.fromkeys(ids))
