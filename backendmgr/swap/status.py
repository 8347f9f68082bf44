"""What the running llama-swap says about itself, over its own API on loopback (issue 21).

``/running`` lists the model servers it has started and their state; ``/v1/models`` lists what
it serves, with each model's ``metadata`` (backendmgr writes the backend row and build there),
so comparing it with the generated file shows whether llama-swap holds the file backendmgr
last wrote. ``/api/version`` names its build. Every answer is bounded and checked before use:
a port may be held by anything. Every look at the API ends within READ_DEADLINE_S in total
(:func:`answers`, issue 29), and each string it answers is shown through ``errors.shown``.

``up``'s record (``<home>/swap/up.json``) is believed only for a process that is that llama-swap
(:func:`identify`); a malformed record, one naming another program, or a link is stale.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import stat
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from .._fs import LinkRefused, atomic_write_bytes, link_refused, unlink_no_follow
from ..errors import first_error, shown
from ..immutable import frozen
from .places import state_path
from .process import alive

if TYPE_CHECKING:
    import httpx

__all__ = [
    "READ_DEADLINE_S",
    "Observed",
    "Recorded",
    "SwapState",
    "Unanswered",
    "answers",
    "compare_models",
    "file_models",
    "identify",
    "observe",
    "read_state",
    "remove_state",
    "served_config",
    "take_up_lock",
    "write_state",
]

MAX_ANSWER = 4 << 20  # bytes of one API answer read
TIMEOUT_S = 3.0  # silence allowed within one answer
READ_DEADLINE_S = 5.0  # total time of one look at llama-swap, every answer of it together
MAX_PID = (1 << 31) - 1  # what the system calls take; larger is no process id


@frozen(slots=True)
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


@frozen(slots=True)
class Recorded:
    """The record read: ``state`` when it names a running llama-swap; otherwise ``stale`` says
    why it does not (both None: there is no record). ``raw``: the bytes read, so that a
    clean-up removes only the record it judged."""

    state: SwapState | None
    stale: str | None = None
    raw: bytes | None = None
    link: bool = False


def take_up_lock(home: Path) -> Callable[[], None] | None:
    """The lock an ``up`` holds for its whole life on ``<home>/swap/up.lock`` (flock: the
    kernel drops it when the process ends, even by kill -9), so that two ``up`` started at
    once cannot both serve, whatever their record says yet. Its release; None when another
    ``up`` holds it. Without flock (Windows) there is no lock: a no-op release. A link in its
    place is refused (:class:`LinkRefused`)."""
    try:
        import fcntl
    except ImportError:
        return lambda: None
    folder = home / "swap"
    if folder.is_symlink():
        raise link_refused(folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "up.lock"
    flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags, 0o644)
    except OSError:
        if path.is_symlink():
            raise link_refused(path) from None
        raise
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return lambda: os.close(fd)


def write_state(home: Path, state: SwapState) -> None:
    atomic_write_bytes(state_path(home), state.as_json(), no_links_below=home)


def remove_state(home: Path, pid: int) -> None:
    """Remove the record, unless another ``up`` has replaced it since."""
    current = read_state(home, identify_it=False)
    if current.link:
        return
    if current.state is None or current.state.pid == pid:
        with contextlib.suppress(LinkRefused):
            unlink_no_follow(state_path(home), home)


def clean_stale(home: Path, seen: Recorded) -> bool:
    """Remove a record judged stale, if it is still the same bytes (a new ``up`` may have
    written its own since). A link is never removed: the user is told."""
    if seen.stale is None or seen.link or seen.raw is None:
        return False
    again = read_state(home, identify_it=False)
    if again.raw != seen.raw:
        return False
    with contextlib.suppress(LinkRefused, OSError):
        unlink_no_follow(state_path(home), home)
        return True
    return False


def _field(data: dict[str, Any], key: str) -> str:
    value = data[key]
    if not isinstance(value, str):
        raise TypeError(key)
    return value


def _pid(data: dict[str, Any], key: str) -> int:
    value = data[key]
    if type(value) is not int or not 0 < value <= MAX_PID:
        raise ValueError(f"{key} {shown(value, 40)} is not a process id")
    return value


def read_state(home: Path, *, identify_it: bool = True) -> Recorded:
    """The record of a running llama-swap. A record that is malformed (an absurd pid, not
    JSON), a link, or names no running llama-swap (a crash or a kill -9 left it, the pid
    now belongs to another program) comes back ``stale``, with the reason."""
    path = state_path(home)
    folder = path.parent
    if folder.is_symlink() or path.is_symlink():
        link = folder if folder.is_symlink() else path
        return Recorded(
            None, f"{link} is a symbolic link; backendmgr does not follow it: remove it", link=True
        )
    try:  # non-blocking: a FIFO in its place must not hang the command that looks
        flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
        fd = os.open(path, flags)
        with os.fdopen(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return Recorded(None, f"{path} is not a regular file; remove it", link=True)
            raw = fh.read(1 << 16)
    except FileNotFoundError:
        return Recorded(None)
    except OSError as exc:
        return Recorded(None, f"{path} cannot be read ({exc.strerror or exc})", link=True)
    try:
        data = json.loads(raw)
        if not isinstance(data, dict):
            raise TypeError("not an object")
        state = SwapState(
            pid=_pid(data, "pid"),
            owner=_pid(data, "owner"),
            listen=_field(data, "listen"),
            url=_field(data, "url"),
            config=_field(data, "config"),
            exe=_field(data, "exe"),
        )
    except (ValueError, KeyError, TypeError, RecursionError) as exc:
        why = shown(exc, 80) if isinstance(exc, ValueError) and "process id" in str(exc) else ""
        return Recorded(None, f"{path} is malformed{f' ({why})' if why else ''}", raw)
    if not identify_it:
        return Recorded(state, None, raw)
    other = identify(state)
    if other is not None:
        return Recorded(None, f"{path} names pid {state.pid}, which {other}", raw)
    return Recorded(state, None, raw)


def _proc_argv(pid: int) -> list[str] | None:
    """The process's arguments from /proc (Linux); None elsewhere or when unreadable."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()[: 1 << 16]
    except OSError:
        return None
    return [a.decode("utf-8", "replace") for a in raw.split(b"\0") if a] or None


def _ps_line(pid: int) -> str | None:
    """The process's command line as ``ps`` shows it (other POSIX systems): the arguments
    joined by spaces, so a path with a space cannot be told from two words."""
    try:
        done = subprocess.run(
            ["ps", "-ww", "-o", "command=", "-p", str(pid)],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() or None if done.returncode == 0 else None


def _same(a: str, b: str) -> bool:
    with contextlib.suppress(OSError):
        return os.path.samefile(a, b)
    return os.path.realpath(a) == os.path.realpath(b)


def identify(state: SwapState) -> str | None:
    """Whether ``state.pid`` is the llama-swap ``up`` started: None when it is, otherwise what
    the pid is instead. Linux: /proc/PID/exe is the recorded executable and /proc/PID/cmdline
    gives it the recorded config. Other POSIX systems: ``ps`` shows a command line that starts
    with the executable and holds ``-config CONFIG``. Windows: never (not running)."""
    if os.name != "posix":
        return "cannot be inspected on this system"
    if not alive(state.pid):
        return "is not running"
    if sys.platform.startswith("linux"):
        argv = _proc_argv(state.pid)
        exe_link = Path(f"/proc/{state.pid}/exe")
        try:
            exe = os.readlink(exe_link).removesuffix(" (deleted)")
        except OSError:
            return "cannot be inspected (not ours)"
        if argv is None:
            return "cannot be inspected (not ours)"
        config, _ = parse_config_flags(argv)
        same_exe = _same(str(exe_link), state.exe) or exe == os.path.realpath(state.exe)
        ours = same_exe and config is not None and _same(config, state.config)
        line = " ".join(argv)
    else:
        found = _ps_line(state.pid)
        if found is None:
            return "cannot be inspected (no ps)"
        line = found
        ours = line.startswith(f"{state.exe} ") and f" -config {state.config} " in f"{line} "
    return None if ours else f"is another program now ({shown(line, 120)})"


def parse_config_flags(argv: Sequence[str]) -> tuple[str | None, bool]:
    """llama-swap's arguments → the config file it was given, and whether it watches it."""
    config = None
    for i, arg in enumerate(argv):
        if arg in ("-config", "--config") and i + 1 < len(argv):
            config = argv[i + 1]
        elif arg.startswith(("-config=", "--config=")):
            config = arg.split("=", 1)[1]
    watching = any(a in ("-watch-config", "--watch-config", "-watch-config=true") for a in argv)
    return config, watching


def served_config(pid: int) -> tuple[str | None, bool]:
    """From the process's own command line (Linux): the file it was given, and whether it
    watches it. (None, False) where the command line cannot be read."""
    argv = _proc_argv(pid)
    return parse_config_flags(argv) if argv else (None, False)


@dataclass(repr=False, eq=False)
class Observed:
    """llama-swap's answers; ``error`` says why there are none."""

    version: str | None = None
    running: list[dict[str, Any]] = field(default_factory=list)
    models: dict[str, dict[str, Any]] = field(default_factory=dict)
    error: str | None = None


class Unanswered(Exception):
    """llama-swap (or whatever holds its port) gave no usable answer in time."""


async def _read(client: httpx.AsyncClient, url: str, keep_tail: bool) -> bytes:
    async with client.stream("GET", url) as response:
        if response.status_code != 200:
            raise Unanswered(f"{url} answered {response.status_code}")
        body = b""
        async for chunk in response.aiter_bytes():
            body += chunk
            if len(body) > MAX_ANSWER:
                if keep_tail:
                    return body[-MAX_ANSWER:]
                raise Unanswered(f"{url} answered more than {MAX_ANSWER >> 20} MiB")
    return body


async def answers(
    base_url: str,
    paths: Sequence[str],
    *,
    deadline: float = READ_DEADLINE_S,
    keep_tail: bool = False,
) -> list[bytes]:
    """The bodies of ``GET base_url+path`` for each path, all within ``deadline`` seconds in
    total (a holder of the port that drips a byte a second is cut off there), each at most
    MAX_ANSWER bytes (``keep_tail``: its last MAX_ANSWER bytes). :class:`Unanswered` otherwise.
    The one way backendmgr reads llama-swap's API."""
    import httpx  # only once llama-swap is known to run: a mutation without it asks nothing

    try:
        with anyio.fail_after(deadline):
            async with httpx.AsyncClient(timeout=TIMEOUT_S, trust_env=False) as client:
                return [await _read(client, f"{base_url}{path}", keep_tail) for path in paths]
    except TimeoutError:
        raise Unanswered(f"no full answer from {base_url} within {deadline:g} s") from None
    except Exception as exc:  # whatever the URL in the record or the port's holder caused
        leaf = first_error(exc)
        raise Unanswered(f"{shown(leaf, 200) or type(leaf).__name__}") from None


async def observe(base_url: str, *, deadline: float = READ_DEADLINE_S) -> Observed:
    """Ask llama-swap for its version, loaded models and served models; every string it
    answers goes through :func:`shown`."""
    seen = Observed()
    try:
        bodies = await answers(
            base_url, ["/api/version", "/running", "/v1/models"], deadline=deadline
        )
        version, running, models = (json.loads(body) for body in bodies)
    except (Unanswered, ValueError, RecursionError) as exc:
        seen.error = f"llama-swap at {shown(base_url, 200)} does not answer ({shown(exc, 300)})"
        return seen
    if isinstance(version, dict) and isinstance(version.get("version"), str):
        seen.version = shown(version["version"], 200)
    rows = running.get("running") if isinstance(running, dict) else None
    for row in rows if isinstance(rows, list) else []:
        if isinstance(row, dict) and isinstance(row.get("model"), str):
            seen.running.append(
                {
                    "model": shown(row["model"], 200),
                    "state": shown(row.get("state", ""), 40),
                    "cmd": shown(row.get("cmd", ""), 8000),
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
        out.append(f"not served yet: {', '.join(map(shown, missing))}")
    if extra:
        out.append(f"served but no longer in the file: {', '.join(map(shown, extra))}")
    changed = sorted(
        m
        for m in set(served) & set(written)
        if any(served[m].get(k) != v for k, v in written[m].items())
    )
    if changed:
        out.append(f"older settings for: {', '.join(map(shown, changed))}")
    return out


def same_file(a: str, b: str) -> bool:
    with contextlib.suppress(OSError):
        return os.path.samefile(a, b)
    return os.path.abspath(a) == os.path.abspath(b)
