"""Where backendmgr keeps its files: explicit argument, then environment, then platformdirs."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Paths"]

APP = "backendmgr"


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
        env = os.environ if environ is None else environ
        config_value = config or env.get("BACKENDMGR_CONFIG") or None
        home_value = home or env.get("BACKENDMGR_HOME") or None
        if config_value is None or home_value is None:
            import platformdirs

            if config_value is None:
                config_value = platformdirs.user_config_path(APP) / "config.yaml"
            if home_value is None:
                home_value = platformdirs.user_data_path(APP)
        return cls(
            config_file=Path(config_value).expanduser().absolute(),
            home=Path(home_value).expanduser().absolute(),
        )

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
