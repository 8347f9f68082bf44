"""Where backendmgr keeps its files: explicit argument, then environment, then platformdirs."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from .locate import locate

__all__ = ["Paths"]


@dataclass(frozen=True, slots=True)
class Paths:
    """The config file and the data home, plus the folders derived from the home (SPEC §1)."""

    config_file: Path
    home: Path

    @classmethod
    def resolve(
        cls,
        *,
        config: str | os.PathLike[str] | None = None,
        home: str | os.PathLike[str] | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> Paths:
        """Pick each location from the argument, else ``BACKENDMGR_*``, else platformdirs."""
        config_file, home_dir = locate(config, home, environ)
        return cls(config_file=config_file, home=home_dir)

    @property
    def config_dir(self) -> Path:
        return self.config_file.parent

    @property
    def config_lock(self) -> Path:
        return self.config_file.with_name(self.config_file.name + ".lock")

    @property
    def user_manifests(self) -> Path:
        return self.config_dir / "manifests"

    @property
    def default_output(self) -> Path:
        return self.config_dir / "llama-swap.yaml"

    @property
    def builds(self) -> Path:
        return self.home / "builds"

    @property
    def downloads(self) -> Path:
        return self.home / "downloads"

    @property
    def cache(self) -> Path:
        return self.home / "cache"

    @property
    def locks(self) -> Path:
        return self.home / "locks"
