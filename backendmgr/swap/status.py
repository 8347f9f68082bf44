"""What the running llama-swap says about itself, over its own API on loopback (issue 21).

``/running`` lists the model servers it has started and their state; ``/v1/models`` lists what
it serves, with each model's ``metadata`` (backendmgr writes the backend row and build there),
so comparing it with the generated file shows whether llama-swap holds the file backendmgr
last wrote. ``/api/version`` names its build. Every answer is bounded and checked before use:
a port may be held by anything.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from .._fs import atomic_write_bytes
from .process import alive

__all__ = [
    "Observed",
    "SwapState",
    "compare_models",
    "file_models",
    "observe",
    "read_state",
    "remove_state",
    "served_config",
    "write_state",
]

MAX_ANSWER = 4 << 20  # bytes of one API answer read
TIMEOUT_S = 3.0


@dataclass(frozen=True, slots=True)
class SwapState:
    """What ``up`` records while llama-swap runs (``<home>/swap/up.json``)."""

    pid: int  # llama-swap
    owner: int  # the backendmgr that started it
    listen: str
    url: str
    config: str
    exe: str

    def as_json(self) -> bytes:
        return json.dumps(dataclasses.asdict(self), indent=1).encode()


def state_path(home: Path) -> Path:
    return home / "swap" / "up.json"


def write_state(home: Path, state: SwapState) -> None:
    atomic_write_bytes(state_path(home), state.as_json())


def remove_state(home: Path, pid: int) -> None:
    """Remove the record, unless another ``up`` has replaced it since."""
    current = read_state(home, check_alive=False)
    if current is None or current.pid == pid:
        with contextlib.suppress(FileNotFoundError):
            state_path(home).unlink()


def read_state(home: Path, *, check_alive: bool = True) -> SwapState | None:
    """The record of a running llama-swap; None when there is none, it is malformed, or the
    process it names is gone (a crash or a kill -9 leaves the file behind)."""
    try:
        with state_path(home).open("rb") as fh:
            data = json.loads(fh.read(1 << 16))
        state = SwapState(
            pid=int(data["pid"]),
            owner=int(data["owner"]),
            listen=str(data["listen"]),
            url=str(data["url"]),
            config=str(data["config"]),
            exe=str(data["exe"]),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if check_alive and (state.pid <= 0 or not alive(state.pid)):
        return None
    return state


def served_config(pid: int) -> tuple[str | None, bool]:
    """From the process's own command line (Linux): the file it was given, and whether it
    watches it. (None, False) where the command line cannot be read."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()[: 1 << 16]
    except OSError:
        return None, False
    argv = [a.decode("utf-8", "replace") for a in raw.split(b"\0") if a]
    config = None
    for i, arg in enumerate(argv):
        if arg in ("-config", "--config") and i + 1 < len(argv):
            config = argv[i + 1]
        elif arg.startswith(("-config=", "--config=")):
            config = arg.split("=", 1)[1]
    watching = any(a in ("-watch-config", "--watch-config", "-watch-config=true") for a in argv)
    return config, watching


@dataclass
class Observed:
    """llama-swap's answers; ``error`` says why there are none."""

    version: str | None = None
    running: list[dict[str, Any]] = field(default_factory=list)
    models: dict[str, dict[str, Any]] = field(default_factory=dict)
    error: str | None = None


async def _get(client: httpx.AsyncClient, url: str) -> Any:
    async with client.stream("GET", url) as response:
        if response.status_code != 200:
            raise ValueError(f"{url} answered {response.status_code}")
        body = b""
        async for chunk in response.aiter_bytes():
            body += chunk
            if len(body) > MAX_ANSWER:
                raise ValueError(f"{url} answered more than {MAX_ANSWER >> 20} MiB")
    return json.loads(body)


async def observe(base_url: str) -> Observed:
    """Ask llama-swap for its version, loaded models and served models."""
    seen = Observed()
    async with httpx.AsyncClient(timeout=TIMEOUT_S, trust_env=False) as client:
        try:
            version = await _get(client, f"{base_url}/api/version")
            running = await _get(client, f"{base_url}/running")
            models = await _get(client, f"{base_url}/v1/models")
        except (httpx.HTTPError, ValueError) as exc:
            seen.error = f"llama-swap at {base_url} does not answer ({exc or type(exc).__name__})"
            return seen
    if isinstance(version, dict) and isinstance(version.get("version"), str):
        seen.version = version["version"][:200]
    rows = running.get("running") if isinstance(running, dict) else None
    for row in rows if isinstance(rows, list) else []:
        if isinstance(row, dict) and isinstance(row.get("model"), str):
            seen.running.append(
                {
                    "model": row["model"][:200],
                    "state": str(row.get("state", ""))[:40],
                    "cmd": str(row.get("cmd", ""))[:8000].strip(),
                }
            )
    data = models.get("data") if isinstance(models, dict) else None
    for item in data if isinstance(data, list) else []:
        if isinstance(item, dict) and isinstance(item.get("id"), str):
            meta = item.get("meta")
            inner = meta.get("llamaswap") if isinstance(meta, dict) else None
            seen.models[item["id"]] = dict(inner) if isinstance(inner, dict) else {}
    return seen


def file_models(text: str) -> dict[str, dict[str, Any]]:
    """Model id → metadata of a generated llama-swap file (unlisted models included: they are
    served too, only hidden from listings)."""
    from .._yaml import load_yaml

    data = load_yaml(text, "the llama-swap config")
    models = data.get("models") if isinstance(data, dict) else None
    out: dict[str, dict[str, Any]] = {}
    for model_id, body in (models or {}).items():
        meta = body.get("metadata") if isinstance(body, dict) else None
        out[str(model_id)] = dict(meta) if isinstance(meta, dict) else {}
    return out


def compare_models(
    served: dict[str, dict[str, Any]], written: dict[str, dict[str, Any]]
) -> list[str]:
    """How what llama-swap serves differs from the file; empty when it holds the file."""
    out: list[str] = []
    missing = sorted(set(written) - set(served))
    extra = sorted(set(served) - set(written))
    if missing:
        out.append(f"not served yet: {', '.join(missing)}")
    if extra:
        out.append(f"served but no longer in the file: {', '.join(extra)}")
    changed = sorted(
        m
        for m in set(served) & set(written)
        if any(served[m].get(k) != v for k, v in written[m].items())
    )
    if changed:
        out.append(f"older settings for: {', '.join(changed)}")
    return out


def same_file(a: str, b: str) -> bool:
    with contextlib.suppress(OSError):
        return os.path.samefile(a, b)
    return os.path.abspath(a) == os.path.abspath(b)
