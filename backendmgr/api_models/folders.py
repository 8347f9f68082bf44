"""``models add-dir`` and ``models remove-dir``: the folders models are found in."""

from __future__ import annotations

from dataclasses import dataclass

from ._shared import Previewed

__all__ = ["ModelsDirResult"]


@dataclass(kw_only=True, repr=False, eq=False)
class ModelsDirResult(Previewed):
    """``models add-dir`` / ``models remove-dir``: the folder and ``models_dirs`` as stored."""

    path: str
    config: str
    models_dirs: list[str]
