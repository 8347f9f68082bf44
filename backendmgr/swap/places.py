"""Where llama-swap's traces are: ``up``'s record of the llama-swap it runs, and the service's
unit (agent) file. A mutation looks at both before it changes anything (whether a running
llama-swap must take the change): two paths, without the modules that read or write them."""

from __future__ import annotations

import os
import sys
from pathlib import Path

__all__ = ["LABEL", "UNIT_NAME", "quiet", "service_file", "service_kind", "state_path"]

UNIT_NAME = "backendmgr-llama-swap.service"
LABEL = "backendmgr.llama-swap"


def state_path(home: Path) -> Path:
    return home / "swap" / "up.json"


def service_kind() -> str:
    return "launchd" if sys.platform == "darwin" else "systemd"


def service_file(environ: dict[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    if service_kind() == "launchd":
        return (
            Path(env.get("HOME", "~")).expanduser() / "Library" / "LaunchAgents" / f"{LABEL}.plist"
        )
    base = env.get("XDG_CONFIG_HOME") or str(Path(env.get("HOME", "~")).expanduser() / ".config")
    return Path(base) / "systemd" / "user" / UNIT_NAME


def quiet(home: Path, environ: dict[str, str] | None = None) -> bool:
    """Neither trace is there: no ``up`` has recorded a llama-swap serving ``home``'s config
    and no service is installed, so a mutation has nothing to follow up (as ``mark`` finds).
    Raises ``OSError`` for a folder that cannot be looked into."""
    return not os.path.lexists(state_path(home)) and not service_file(environ).exists()
