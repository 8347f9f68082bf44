"""Where backendmgr keeps its files: explicit argument, then environment, then platformdirs."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from .locate import CACHE, USER_MANIFESTS, locate

__all__ = ["Paths", "as_config_means"]


def as_config_means(config: Path, entry: str) -> str:
    """A path the config file holds (``output``, a ``models_dirs`` entry) as the file means it:
    ``~`` expanded, and a relative one taken from the config's own folder, never from wherever
    a command happens to run (``models add-dir`` stores folders absolute anyway)."""
    return os.path.join(config.parent, os.path.expanduser(entry))


class _Below:
    """A folder of a fixed name below the data home (or the config file's folder)."""

    def __init__(self, name: str, *, config: bool = False) -> None:
        self.name = name
        self.config = config

    def __get__(self, paths: Paths, owner: type[Paths] | None = None) -> Path:
        return (paths.config_dir if self.config else paths.home) / self.name


class Paths:
    """The config file and the data home, plus the folders derived from the home (SPEC §1).

    A plain class, immutable by type (``Final``): a dataclass costs every command's start
    its ``__init__`` compiled (issue 30)."""

    __slots__ = ("config_file", "home")

    config_file: Final[Path]
    home: Final[Path]

    def __init__(self, *, config_file: Path, home: Path) -> None:
        self.config_file = config_file
        self.home = home

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
        return cls(config_file=Path(config_file), home=Path(home_dir))

    @property
    def config_dir(self) -> Path:
        return self.config_file.parent

    @property
    def config_lock(self) -> Path:
        """Beside the file the config resolves to, not the name it was given: a config reached
        through a link (dotfiles) and by its own path is one file, written through the link,
        and two locks would let two commands lose each other's change."""
        real = Path(os.path.realpath(self.config_file))
        return real.with_name(real.name + ".lock")

    # the folders SPEC §1 places below the config file's folder and below the data home
    user_manifests = _Below(USER_MANIFESTS, config=True)
    default_output = _Below("llama-swap.yaml", config=True)
    builds = _Below("builds")
    downloads = _Below("downloads")
    cache = _Below(CACHE)
    locks = _Below("locks")
