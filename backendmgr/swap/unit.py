"""A background service that runs ``backendmgr up``: a systemd user unit on Linux, a launchd
agent on macOS (issue 21).

The service runs backendmgr itself (``python -m backendmgr … up``), not a fixed llama-swap
path: every start picks the activated llama-swap build and regenerates a stale config, so
activating or updating llama-swap needs a restart, never a rewritten unit. The files are
built from data: every argument of the unit is quoted for systemd (``%`` escaped everywhere,
``$`` only in ``ExecStart=``, where it expands variables: in ``Environment=`` it has no special
meaning; control characters refused), the agent is written by :mod:`plistlib`. The unit is
written in place only: a symbolic link there is refused, never written through.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from .._fs import atomic_write_bytes
from ..errors import InvalidInput
from ..immutable import frozen
from .places import LABEL, UNIT_NAME, service_file, service_kind

__all__ = [
    "LABEL",
    "UNIT_NAME",
    "ServiceSpec",
    "agent_plist",
    "control",
    "service_file",
    "systemd_quote",
    "systemd_unit",
    "write_service",
]

CONTROL_TIMEOUT_S = 60.0
OUTPUT_CAP = 8192


@frozen(slots=True)
class ServiceSpec:
    """What the service runs: ``argv`` (backendmgr up with its paths), and where it logs."""

    argv: tuple[str, ...]
    log: Path
    environment: tuple[tuple[str, str], ...] = ()

    @classmethod
    def for_paths(
        cls,
        config: Path,
        home: Path,
        listen: str,
        *,
        public: bool,
        log: Path,
        path: str | None = None,
    ) -> ServiceSpec:
        """``path``: the PATH the model commands find bare program names on (a service
        manager starts with a minimal one)."""
        argv = [sys.executable, "-m", "backendmgr", "--config", str(config), "--home", str(home)]
        argv += ["up", "--listen", listen]
        if public:
            argv.append("--public")
        return cls(tuple(argv), log, (("PATH", path),) if path else ())


def systemd_quote(word: str, *, variables: bool = True) -> str:
    """One word as systemd reads it back (systemd.syntax(7)): double-quoted, with ``\\`` and
    ``"`` escaped, ``%`` (specifiers) doubled, and ``$`` doubled where the directive expands
    ``variables`` (``ExecStart=``; not ``Environment=``, where ``$$`` would stay ``$$``). A
    control character (a newline would start a new directive) is refused."""
    if any(not ch.isprintable() for ch in word):
        raise InvalidInput(f"{word!r} holds a control character; it cannot go into a unit file")
    body = word.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%")
    if variables:
        body = body.replace("$", "$$")
    return f'"{body}"'


def systemd_unit(spec: ServiceSpec) -> str:
    """The unit's text; the log goes to the journal (``journalctl --user -u`` the unit).
    ``up`` exits 1 on a refused config or a failed start and systemd does
    not restart it then (no restart loop); a crash (a signal) is restarted."""
    sections: list[tuple[str, list[tuple[str, str]]]] = [
        (
            "Unit",
            [
                ("Description", "llama-swap on the config backendmgr generates"),
                ("Documentation", "man:systemd.service(5)"),
                ("After", "network-online.target"),
                ("StartLimitIntervalSec", "300"),
                ("StartLimitBurst", "5"),
            ],
        ),
        (
            "Service",
            [
                ("Type", "simple"),
                ("ExecStart", " ".join(systemd_quote(a) for a in spec.argv)),
                *(
                    ("Environment", systemd_quote(f"{k}={v}", variables=False))
                    for k, v in spec.environment
                ),
                ("Restart", "on-abnormal"),
                ("RestartSec", "5"),
                # SIGTERM to backendmgr alone: it stops llama-swap and the model servers in order
                ("KillMode", "mixed"),
                ("TimeoutStopSec", "30"),
            ],
        ),
        ("Install", [("WantedBy", "default.target")]),
    ]
    lines = ["# written by backendmgr service install; rewritten by it, do not edit"]
    for name, entries in sections:
        lines += ["", f"[{name}]", *(f"{k}={v}" for k, v in entries)]
    return "\n".join(lines) + "\n"


def agent_plist(spec: ServiceSpec) -> bytes:
    """The launchd agent: started at login, restarted after a crash only."""
    data = {
        "Label": LABEL,
        "ProgramArguments": list(spec.argv),
        "EnvironmentVariables": dict(spec.environment),
        "RunAtLoad": True,
        "KeepAlive": {"Crashed": True},
        "ThrottleInterval": 10,
        "StandardOutPath": str(spec.log),
        "StandardErrorPath": str(spec.log),
        "ProcessType": "Background",
    }
    import plistlib  # macOS's agent only: a Linux edit's look for the unit loads no XML

    return plistlib.dumps(data)


def write_service(spec: ServiceSpec, target: Path) -> None:
    """Write the unit (agent) in place: a link at ``target`` is refused (:class:`LinkRefused`),
    and what it points at stays untouched."""
    body = agent_plist(spec) if target.suffix == ".plist" else systemd_unit(spec).encode()
    spec.log.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(target, body, no_links_below=target.parent)


@frozen(slots=True)
class Controlled:
    ok: bool
    output: str  # what the tool said, bounded


def _run(argv: Sequence[str]) -> Controlled:
    try:
        done = subprocess.run(
            list(argv),
            capture_output=True,
            text=True,
            timeout=CONTROL_TIMEOUT_S,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except FileNotFoundError:
        return Controlled(False, f"{argv[0]} not found")
    except (OSError, subprocess.SubprocessError) as exc:
        return Controlled(False, f"{argv[0]}: {exc}")
    said = (done.stdout + done.stderr).strip()[-OUTPUT_CAP:]
    return Controlled(done.returncode == 0, said)


def control(action: str, target: Path) -> Controlled:
    """``systemctl --user`` / ``launchctl`` for one action: install (load and enable), start,
    stop, restart, status, uninstall (disable and unload)."""
    if service_kind() == "launchd":
        domain = f"gui/{os.getuid()}"
        commands = {
            "install": [["launchctl", "bootstrap", domain, str(target)]],
            "start": [["launchctl", "kickstart", f"{domain}/{LABEL}"]],
            "stop": [["launchctl", "kill", "SIGTERM", f"{domain}/{LABEL}"]],
            "restart": [["launchctl", "kickstart", "-k", f"{domain}/{LABEL}"]],
            "status": [["launchctl", "print", f"{domain}/{LABEL}"]],
            "uninstall": [["launchctl", "bootout", f"{domain}/{LABEL}"]],
        }[action]
    else:
        ctl = ["systemctl", "--user"]
        commands = {
            "install": [[*ctl, "daemon-reload"], [*ctl, "enable", "--now", UNIT_NAME]],
            "start": [[*ctl, "start", UNIT_NAME]],
            "stop": [[*ctl, "stop", UNIT_NAME]],
            "restart": [[*ctl, "restart", UNIT_NAME]],
            "status": [[*ctl, "status", "--no-pager", "--lines=5", UNIT_NAME]],
            "uninstall": [[*ctl, "disable", "--now", UNIT_NAME]],
        }[action]
    said: list[str] = []
    for argv in commands:
        result = _run(argv)
        if result.output:
            said.append(result.output)
        if not result.ok:
            return Controlled(False, "\n".join(said))
    return Controlled(True, "\n".join(said))


def is_active(target: Path) -> bool:
    """Whether the installed service runs now (False where the tool is missing)."""
    if not target.exists():
        return False
    if service_kind() == "launchd":
        return control("status", target).ok
    result = _run(["systemctl", "--user", "is-active", "--quiet", UNIT_NAME])
    return result.ok


def remove_service(target: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        target.unlink()
    if service_kind() == "systemd":
        _run(["systemctl", "--user", "daemon-reload"])
