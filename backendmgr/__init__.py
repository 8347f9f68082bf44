"""backendmgr: install and version local inference backends, and keep llama-swap's config right.

The public API is :class:`Manager` plus the errors; everything else may move. Names load on
first use so that importing the package (and starting the CLI) stays cheap.
"""

from __future__ import annotations

import sys as _sys


def _cancelled_while_starting(signum: int, frame: object) -> None:
    """A Ctrl-C while the command is still loading, before its own handling is in place:
    said as every cancel is (``error: cancelled``, 130), not as a traceback of an import."""
    import os

    _sys.stderr.write("error: cancelled\n")
    os._exit(130)


def _command_starting() -> bool:
    """Whether this import is the ``backendmgr`` command starting (``python -m backendmgr`` or
    the installed script), never a library's import of the package."""
    argv = list(getattr(_sys, "orig_argv", ()))
    if "-m" in argv[:-1] and argv[argv.index("-m") + 1] == "backendmgr":
        return True
    script = _sys.argv[0] if _sys.argv else ""
    return script.replace("\\", "/").rsplit("/", 1)[-1] in ("backendmgr", "backendmgr.exe")


if _command_starting():  # from its first line on; the command puts Python's own back to run
    import _signal  # type: ignore[import-not-found]  # signal's C module: no enums to build

    _signal.signal(_signal.SIGINT, _cancelled_while_starting)

from typing import TYPE_CHECKING  # noqa: E402

from ._version import __version__  # noqa: E402

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
