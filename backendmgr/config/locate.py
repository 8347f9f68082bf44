"""Where the config file and the data home are: the argument, else ``BACKENDMGR_*``, else
platformdirs. Kept apart from :class:`~backendmgr.config.paths.Paths` (a dataclass), and as
texts: <TAB> finds them with :mod:`os` alone (:mod:`pathlib` costs more than the <TAB>)."""

from __future__ import annotations

import os
from collections.abc import Mapping

__all__ = [
    "APP",
    "CACHE",
    "USER_MANIFESTS",
    "builtin_folder",
    "locate",
    "manifest_folders",
    "manifest_names",
]

APP = "backendmgr"

USER_MANIFESTS = "manifests"
"""The user's manifests: this folder beside the config file (SPEC §1)."""

CACHE = "cache"
"""The cache folder below the data home (SPEC §1)."""


def _absolute(value: str | os.PathLike[str]) -> str:
    """``value`` with a leading ``~`` expanded, made absolute against the current folder as
    :meth:`pathlib.Path.absolute` does (no ``..`` resolved, no link followed)."""
    text = os.path.expanduser(os.fspath(value))
    return text if os.path.isabs(text) else os.path.join(os.getcwd(), text)


def locate(
    config: str | os.PathLike[str] | None = None,
    home: str | os.PathLike[str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> tuple[str, str]:
    """The config file and the data home, absolute (SPEC §1)."""
    env = os.environ if environ is None else environ
    config_value = config or env.get("BACKENDMGR_CONFIG") or None
    home_value = home or env.get("BACKENDMGR_HOME") or None
    if config_value is None or home_value is None:
        import platformdirs

        if config_value is None:
            config_value = os.path.join(platformdirs.user_config_dir(APP), "config.yaml")
        if home_value is None:
            home_value = platformdirs.user_data_dir(APP)
    return _absolute(config_value), _absolute(home_value)


def manifest_folders(
    config: str | os.PathLike[str] | None = None, home: str | os.PathLike[str] | None = None
) -> tuple[str, str]:
    """The user's manifests (beside the config file) and the data home's cache folder, found
    as :class:`~backendmgr.config.paths.Paths` finds them, without making one."""
    config_file, data_home = locate(config, home)
    return os.path.join(os.path.dirname(config_file), USER_MANIFESTS), os.path.join(
        data_home, CACHE
    )


def builtin_folder() -> str:
    """The shipped manifests: ``backendmgr/_manifests`` in a wheel, ``manifests/`` in a checkout."""
    package = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
    bundled = os.path.join(package, "_manifests")
    checkout = os.path.join(os.path.dirname(package), "manifests")
    return bundled if os.path.isdir(bundled) else checkout


def manifest_names(folder: str | os.PathLike[str]) -> list[str]:
    """The manifests' file names in ``folder``, in the order the catalog loads them (``*.yaml``
    sorted, then ``*.yml``); none when it cannot be listed."""
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    return sorted(n for n in names if n.endswith(".yaml")) + sorted(
        n for n in names if n.endswith(".yml")
    )
