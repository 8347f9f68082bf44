"""Run llama-swap in the foreground on the generated config, and stop it with everything it
started (issue 21).

llama-swap starts each model server in a process group of its own, so signalling llama-swap's
group does not reach them. On SIGTERM llama-swap stops its servers itself; should it not
manage within the grace period, the servers it started (found before the stop: once
llama-swap is gone its children belong to init) are killed with their groups. Its log is
forwarded line by line; a config it refuses ends the run with its own last error line.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import anyio
from anyio.abc import ByteReceiveStream, Process

from .._proc import cannot_start, open_group
from ..errors import BackendmgrError, shown

__all__ = ["SwapCrashed", "SwapFailed", "SwapRun", "descendants", "run_swap", "swap_argv"]

GRACE_S = 10.0  # llama-swap's own shutdown stops its model servers first
READY_TIMEOUT_S = 30.0
POLL_S = 0.05
TRACK_S = 1.0  # how often the servers llama-swap started are noted
LINE_CAP = 4096  # bytes of one log line kept
_STAMP = re.compile(r"^\d{4}/\d\d/\d\d \d\d:\d\d:\d\d ")
# an error of llama-swap's own: its "[ERROR]"/slog "level=ERROR" lines, a Go panic, a fatal
# start-up error ("Error loading config: …"); never an "[INFO]" line or an access-log line
_ERROR = re.compile(r"\b(error|fatal|panic)\b", re.IGNORECASE)
_NOT_ERROR = re.compile(r"^\s*\[(INFO|DEBUG)\]|\bRequest\b")


class SwapFailed(BackendmgrError):
    """llama-swap would not start or stopped by itself."""


class SwapCrashed(SwapFailed):
    """llama-swap had been serving, then exited without being asked to: worth a restart, unlike
    a config it refuses at start. ``status``: how it ended; ``error``: its last error line."""

    def __init__(self, message: str, status: str = "", error: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.error = error


def swap_argv(exe: str | Path, config: Path, listen: str) -> list[str]:
    """The command line: the config watched, so every regeneration reaches it."""
    return [str(exe), "-config", str(config), "-listen", listen, "-watch-config"]


@dataclass(repr=False, eq=False)
class SwapRun:
    """What a caller learns about the running llama-swap."""

    pid: int
    children: set[int]


def _proc_parents() -> dict[int, int]:
    """pid → parent pid for every process we can see."""
    out: dict[int, int] = {}
    proc = Path("/proc")
    if proc.is_dir():
        for entry in proc.iterdir():
            if not entry.name.isdigit():
                continue
            with contextlib.suppress(OSError, ValueError, IndexError):
                stat = (entry / "stat").read_text()
                # "pid (comm) state ppid ...": comm may hold spaces and parentheses
                out[int(entry.name)] = int(stat[stat.rindex(")") + 2 :].split()[1])
        return out
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        done = subprocess.run(
            ["ps", "-A", "-o", "pid=", "-o", "ppid="],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
        for line in done.stdout.splitlines()[:100_000]:
            parts = line.split()
            if len(parts) == 2 and parts[0].isdigit() and parts[1].isdigit():
                out[int(parts[0])] = int(parts[1])
    return out


def descendants(pid: int) -> set[int]:
    """Every process below ``pid`` now (children, their children, …)."""
    parents = _proc_parents()
    found: set[int] = set()
    frontier = {pid}
    while frontier:
        frontier = {p for p, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def started_at(pid: int) -> str | None:
    """When ``pid`` started (Linux: clock ticks since boot), so that a remembered pid that has
    since been reused by another program is never signalled. None where unknown."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat[stat.rindex(")") + 2 :].split()[19]
    except (OSError, ValueError, IndexError):
        return None


def adopt_orphans() -> bool:
    """Make this process the one that inherits the orphans of its descendants (Linux's child
    subreaper): a model server whose llama-swap was killed then stays below us, where a tree
    walk finds it, however quickly llama-swap died after starting it. For a process that runs
    llama-swap alone (``backendmgr up``): below it, every process is llama-swap's."""
    global _ADOPTING
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        _ADOPTING = libc.prctl(36, 1, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        _ADOPTING = False
    return _ADOPTING


_ADOPTING = False


class Tracked:
    """The servers llama-swap started, remembered with their start times while it runs: if
    llama-swap dies (kill -9), its servers live on as orphans that no tree walk finds."""

    def __init__(self) -> None:
        self.known: dict[int, str] = {}

    def refresh(self, root: int) -> None:
        for pid in descendants(root):
            stamp = started_at(pid)
            if stamp is not None:
                self.known.setdefault(pid, stamp)

    def still_ours(self) -> set[int]:
        return {pid for pid, stamp in self.known.items() if started_at(pid) == stamp}


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie has exited: it only waits to be reaped
    with contextlib.suppress(OSError, IndexError):
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat[stat.rindex(")") + 2] != "Z"
    return True


def _kill(pid: int, sig: int, *, group: bool) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if group:
            os.killpg(pid, sig)
        else:
            os.kill(pid, sig)


def parent_of(pid: int) -> int | None:
    return _proc_parents().get(pid) if pid > 0 else None


async def replace_running(pid: int, owner: int, timeout: float = GRACE_S + 5) -> None:
    """Stop the llama-swap (``pid``, identified by the caller) that another ``up`` runs: that
    ``up`` gets SIGTERM when it is still llama-swap's parent (it stops llama-swap and the
    model servers in order, and removes its record); otherwise llama-swap itself does (it
    stops its servers). Whatever is left after ``timeout`` is killed."""
    target = owner if parent_of(pid) == owner else pid
    _kill(target, signal.SIGTERM, group=False)
    with anyio.move_on_after(timeout):
        while alive(pid) or alive(target):
            await anyio.sleep(POLL_S)
    for left in (pid, target):
        if alive(left):
            _kill(left, signal.SIGKILL, group=False)


class _Lines:
    """Split a stream into lines, bounded; hand each to ``sink`` and keep the last few."""

    def __init__(self, sink: Callable[[str], None], keep: int = 8) -> None:
        self.sink = sink
        self.last: deque[str] = deque(maxlen=keep)
        self.last_error: str | None = None
        self._partial = b""
        self.done = anyio.Event()

    def feed(self, chunk: bytes) -> None:
        data = self._partial + chunk
        *complete, self._partial = data.split(b"\n")
        if len(self._partial) > LINE_CAP:
            complete.append(self._partial[:LINE_CAP])
            self._partial = b""
        for raw in complete:
            self._emit(raw)

    def close(self) -> None:
        if self._partial:
            self._emit(self._partial)
            self._partial = b""

    def _emit(self, raw: bytes) -> None:
        line = raw[:LINE_CAP].decode("utf-8", "replace").rstrip("\r")
        if line.strip():
            self.last.append(line)
            bare = _STAMP.sub("", line)
            if _ERROR.search(bare) and not _NOT_ERROR.search(bare):
                self.last_error = bare.strip()
            self.sink(line)


async def _pump(stream: ByteReceiveStream | None, lines: _Lines) -> None:
    try:
        if stream is not None:
            with contextlib.suppress(anyio.EndOfStream, anyio.BrokenResourceError, OSError):
                async for chunk in stream:
                    lines.feed(chunk)
        lines.close()
    finally:
        lines.done.set()


def _exit_status(process: Process) -> str:
    code = process.returncode
    return f"status {code}" if code is not None and code >= 0 else f"signal {-(code or 0)}"


def _last_error(err: _Lines, out: _Lines) -> str | None:
    """llama-swap's last error line (either stream; stderr's when both have one)."""
    found = err.last_error or out.last_error
    return shown(found) if found else None


def _reason(process: Process, err: _Lines, out: _Lines) -> str:
    """Why llama-swap would not start: its last error line, else the last it wrote on stderr
    (a fatal start-up message need not say "error")."""
    said = _last_error(err, out)
    if said is None and err.last:
        said = shown(_STAMP.sub("", err.last[-1]))
    status = _exit_status(process)
    return f"({status}): {said}" if said else f"({status}) without a message"


async def _ready(process: Process, url: str, timeout: float, stop: anyio.Event) -> bool:
    """Poll llama-swap's /health until it answers; False when it exited (or we were told to
    stop) first."""
    import httpx  # ``up``'s: the status checks that import this module start nothing

    async with httpx.AsyncClient(timeout=2.0, trust_env=False) as client:
        with anyio.fail_after(timeout):
            while process.returncode is None and not stop.is_set():
                with contextlib.suppress(httpx.HTTPError):
                    if (await client.get(url)).status_code == 200:
                        return True
                await anyio.sleep(POLL_S)
    return False


async def stop_swap(
    process: Process, grace: float = GRACE_S, tracked: Tracked | None = None
) -> None:
    """SIGTERM llama-swap (it stops its model servers), then SIGKILL whatever of it and of
    the servers it started is left. Shielded: a second Ctrl-C cannot leave servers running."""
    with anyio.CancelScope(shield=True):
        children = descendants(process.pid) if process.returncode is None else set()
        if tracked is not None:
            children |= tracked.still_ours()
        if _ADOPTING:  # servers of a llama-swap that died were handed to us
            children |= descendants(os.getpid()) - {process.pid}
        if process.returncode is None:
            _kill(process.pid, signal.SIGTERM, group=os.name == "posix")
            with anyio.move_on_after(grace):
                await process.wait()
        if os.name == "posix":
            _kill(process.pid, signal.SIGKILL, group=True)
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
        with anyio.move_on_after(5):
            await process.wait()
        # servers llama-swap did not stop (it was killed, or one ignored SIGTERM)
        for pid in children:
            if alive(pid):
                with contextlib.suppress(OSError):
                    if os.getpgid(pid) == pid:
                        _kill(pid, signal.SIGKILL, group=True)
                _kill(pid, signal.SIGKILL, group=False)
        with anyio.move_on_after(5):
            while any(alive(pid) for pid in children):
                await anyio.sleep(POLL_S)


async def run_swap(
    argv: list[str],
    *,
    health_url: str,
    on_line: Callable[[str], None],
    on_ready: Callable[[SwapRun], None],
    stop: anyio.Event,
    ready_timeout: float = READY_TIMEOUT_S,
    grace: float = GRACE_S,
    env: dict[str, str] | None = None,
) -> None:
    """Run llama-swap until ``stop`` is set (then stop it and its servers) or it exits by
    itself (:class:`SwapFailed` with its own last error line). It gets SIGTERM should this
    process die without stopping it (a kill -9): it then stops its model servers itself."""
    try:
        process = await open_group(argv, env=env, merge=False, die_with_parent=True)
    except OSError as exc:
        raise SwapFailed(cannot_start(argv, exc)) from None
    # a line from llama-swap (a model server it started says it is healthy) looks for new
    # servers at once: one killed with llama-swap a moment later is still known as ours
    poke, poked = anyio.create_memory_object_stream[None](1)

    def heard(line: str) -> None:
        on_line(line)
        with contextlib.suppress(anyio.WouldBlock, anyio.ClosedResourceError):
            poke.send_nowait(None)

    out, err = _Lines(heard), _Lines(heard)
    tracked = Tracked()
    failure: str | None = None
    crashed: SwapCrashed | None = None
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(_pump, process.stdout, out)
            tg.start_soon(_pump, process.stderr, err)
            try:
                ready = await _ready(process, health_url, ready_timeout, stop)
            except TimeoutError:
                failure = f"llama-swap did not answer on {health_url} within {ready_timeout:g} s"
                ready = False
            if ready:
                on_ready(SwapRun(process.pid, descendants(process.pid)))
                async with anyio.create_task_group() as waiters:

                    async def track() -> None:
                        while True:
                            await anyio.to_thread.run_sync(tracked.refresh, process.pid)
                            with anyio.move_on_after(TRACK_S):
                                await poked.receive()

                    async def exited() -> None:
                        await process.wait()
                        waiters.cancel_scope.cancel()

                    async def stopped() -> None:
                        await stop.wait()
                        waiters.cancel_scope.cancel()

                    waiters.start_soon(exited)
                    waiters.start_soon(stopped)
                    waiters.start_soon(track)
            if not stop.is_set() and failure is None:
                await process.wait()
                with anyio.move_on_after(1.0):  # its last words, still in the pipes
                    await out.done.wait()
                    await err.done.wait()
                if ready:
                    error = _last_error(err, out)
                    status = _exit_status(process)
                    failure = f"llama-swap stopped ({status})" + (
                        f"; its last error: {error}" if error else ""
                    )
                    crashed = SwapCrashed(failure, status, error)
                else:
                    failure = f"llama-swap refused to start {_reason(process, err, out)}"
            tg.cancel_scope.cancel()
    finally:
        poke.close()
        poked.close()
        await stop_swap(process, grace, tracked)
        with anyio.CancelScope(shield=True):
            await process.aclose()
    if crashed is not None:
        raise crashed
    if failure is not None:
        raise SwapFailed(failure)
