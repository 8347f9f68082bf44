"""backendmgr: install and version local inference backends, and keep llama-swap's config right.

The public API is :class:`Manager` plus the errors; everything else may move. Names load on
first use so that importing the package (and starting the CLI) stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._version import __version__

if TYPE_CHECKING:
    from typing import Any

    from .config.paths import Paths
    from .errors import (
        BackendmgrError,
        Cancelled,
        ConfigError,
        InstallFailed,
        InvalidInput,
        NetworkError,
        NotFound,
        Refused,
        UnsafeArchive,
        VerificationError,
    )
    from .manager import Manager
    from .results import Outcome

__all__ = [
    "BackendmgrError",
    "Cancelled",
    "ConfigError",
    "InstallFailed",
    "InvalidInput",
    "Manager",
    "NetworkError",
    "NotFound",
    "Outcome",
    "Paths",
    "Refused",
    "UnsafeArchive",
    "VerificationError",
    "__version__",
]

_WHERE = {
    "Manager": "manager",
    "Paths": "config.paths",
    "Outcome": "results",
}


def __getattr__(name: str) -> Any:
    import importlib

    if name in _WHERE:
        return getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)
    if name in __all__:
        return getattr(importlib.import_module(".errors", __name__), name)
    raise AttributeError(f"module 'backendmgr' has no attribute {name!r}")
