"""The component and variant ids <TAB> offers, read from the manifests without validating them:
shell completion must not pay for pydantic, the YAML library or the whole catalog.

A built-in manifest's id is its file's name (the catalog refuses one that says otherwise), so
``install <TAB>`` lists those from the folder and reads only the user's manifests, and
``--variant <TAB>`` reads the one manifest it names: its kept parse (:mod:`.files`), else its
YAML. Standard library only until a manifest is read.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

from ..config.locate import builtin_folder, manifest_names

__all__ = ["builtin_ids", "component_ids", "variant_ids"]


def builtin_ids(builtin_dir: str | os.PathLike[str] | None = None) -> dict[str, str]:
    """Each built-in component's id (its manifest's file name without the suffix, as the
    catalog names it) and its file, in the catalog's order; no file is read."""
    folder = builtin_folder() if builtin_dir is None else os.fspath(builtin_dir)
    found: dict[str, str] = {}
    for name in manifest_names(folder):
        found.setdefault(os.path.splitext(name)[0], os.path.join(folder, name))
    return found


def _said(path: str, cache: str | os.PathLike[str] | None) -> dict[str, Any] | None:
    """The manifest at ``path`` as written, when it can be read and has a string ``id``: a
    file that cannot be read is left out rather than failing a completion, and a <TAB> reads
    kept parses but writes none."""
    from pathlib import Path

    from .files import read_manifest

    with contextlib.suppress(Exception):
        data = read_manifest(Path(path), None if cache is None else Path(cache))
        if isinstance(data, dict) and isinstance(data.get("id"), str):
            return data
    return None


def _users(
    user_dir: str | os.PathLike[str] | None, cache: str | os.PathLike[str] | None
) -> list[dict[str, Any]]:
    """The user's manifests that say an ``id`` (:func:`_said`), in the catalog's order."""
    if user_dir is None or not os.path.isdir(user_dir):
        return []
    said = (_said(os.path.join(user_dir, name), cache) for name in manifest_names(user_dir))
    return [data for data in said if data is not None]


def component_ids(
    user_dir: str | os.PathLike[str] | None = None, cache: str | os.PathLike[str] | None = None
) -> list[str]:
    """The built-in components' ids (from their files' names), then each of the user's
    manifests' ``id`` as written (the catalog validates them when it loads)."""
    users = [data["id"] for data in _users(user_dir, cache)]
    return list(dict.fromkeys([*builtin_ids(), *users]))


def variant_ids(
    component: str | None,
    user_dir: str | os.PathLike[str] | None = None,
    cache: str | os.PathLike[str] | None = None,
) -> list[str]:
    """The variant ids ``component``'s manifest lists (every manifest's for ``None`` or an
    unknown one), as written: ``install COMPONENT --variant <TAB>``. A built-in component's
    manifest is the only file read."""
    builtin = builtin_ids()
    if component in builtin:
        chosen = [data for data in [_said(builtin[component], cache)] if data is not None]
    else:
        users = _users(user_dir, cache)
        chosen = [m for m in users if m["id"] == component][:1]
        if not chosen:
            every = (_said(file, cache) for file in builtin.values())
            chosen = [data for data in every if data is not None] + users
    ids: list[str] = []
    for data in chosen:
        variants = data.get("variants")
        for variant in variants if isinstance(variants, list) else []:
            if isinstance(variant, dict) and isinstance(variant.get("id"), str):
                ids.append(variant["id"])
    return list(dict.fromkeys(ids))
