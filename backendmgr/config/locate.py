"""Where the config file and the data home are: the argument, else ``BACKENDMGR_*``, else
platformdirs. Kept apart from :class:`~backendmgr.config.paths.Paths` (a dataclass): <TAB>
finds them with the standard library and platformdirs alone."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

__all__ = ["APP", "CACHE", "USER_MANIFESTS", "builtin_folder", "builtin_manifest_dir", "locate"]

APP = "backendmgr"

USER_MANIFESTS = "manifests"
"""The user's manifests: this folder beside the config file (SPEC §1)."""

CACHE = "cache"
"""The cache folder below the data home (SPEC §1)."""


def locate(
    config: str | os.PathLike[str] | None = None,
    home: str | os.PathLike[str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> tuple[Path, Path]:
    """The config file and the data home, absolute (SPEC §1)."""
    env = os.environ if environ is None else environ
    config_value = config or env.get("BACKENDMGR_CONFIG") or None
    home_value = home or env.get("BACKENDMGR_HOME") or None
    if config_value is None or home_value is None:
        import platformdirs

        if config_value is None:
            config_value = platformdirs.user_config_path(APP) / "config.yaml"
        if home_value is None:
            home_value = platformdirs.user_data_path(APP)
    return (
        Path(config_value).expanduser().absolute(),
        Path(home_value).expanduser().absolute(),
    )


def builtin_folder() -> str:
    """The shipped manifests: ``backendmgr/_manifests`` in a wheel, ``manifests/`` in a checkout
    (a text, for <TAB>: listing them needs no :mod:`pathlib`)."""
    package = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
    bundled = os.path.join(package, "_manifests")
    checkout = os.path.join(os.path.dirname(package), "manifests")
    return bundled if os.path.isdir(bundled) else checkout


def builtin_manifest_dir() -> Path:
    """:func:`builtin_folder` as a path."""
    return Path(builtin_folder())
