"""Start one emitted command, wait until it is healthy, send it one request, stop it (SPEC §19).

The I/O edge of ``verify``: the argv and environment come from :func:`.emit.expand.expand`
(llama-swap's own expansion and shell-words split, never through a shell) for a free loopback
port; a bare program name is found on the caller's PATH, as llama-swap's Go ``exec`` does.
The child runs in its own process group so that everything it spawns (vLLM starts an engine
process) is stopped with it: SIGTERM to the group, SIGKILL after a grace period, and the
cleanup is shielded so that Ctrl-C or a cancelled task still stops it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import shutil
import signal
import socket
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import anyio
import httpx
from anyio.abc import Process

from ._commit import undoing
from ._proc import cannot_start, open_group
from .immutable import frozen

__all__ = [
    "CheckResult",
    "Unusable",
    "bounded_answer",
    "check_command",
    "free_port",
    "gpu_memory_gib",
    "substitute_port",
]

TAIL_LINES = 12  # lines of the child's output kept for a failure report
LOG_LINES = 200  # kept to recognise a failure's cause: vLLM's root error precedes its traceback
TAIL_LINE_CHARS = 240
PARTIAL_CAP = 8192  # bytes of an unterminated line kept while more arrives
BODY_CHARS = 200  # of an HTTP error body, in the reason
ANSWER_CAP = 8 << 20  # bytes of one answer read (an embedding of 32k floats fits)
HEALTH_WAIT_S = 5.0  # one health request, in all
GRACE_S = 5.0
POLL_S = 0.1
NVIDIA_SMI_TIMEOUT_S = 10.0
NVIDIA_SMI_CAP = 1 << 20


Measure = Callable[[int, Mapping[str, str]], Awaitable[tuple[float, str] | None]]
"""Reads a process group's memory: (GiB, what measured it), None when nothing can tell."""

Then = Callable[[httpx.AsyncClient], Awaitable[Any]]
"""More work against the healthy server (its base URL set on the client), while it runs."""


@frozen(slots=True)
class CheckResult:
    ok: bool
    reason: str | None  # why it failed; None when ok
    ready_s: float | None  # seconds from start to a healthy answer
    gpu_gib: float | None  # the process group's GPU memory, where nvidia-smi reports it
    pid: int | None  # the child, for callers that check it is gone
    device: str | None = None  # the GPU(s) the build said it used: "CUDA0 (NVIDIA …)"
    measured: tuple[float, str] | None = None  # ``measure``'s reading (GiB, by what), if asked
    log: str | None = None  # an exit's reason with up to LOG_LINES lines, to find its cause
    then: Any = None  # what ``then`` returned, if asked (``bench``'s runs)


def free_port() -> int:
    """A port nothing listens on now; the child binds it a moment later."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def substitute_port(argv: list[str], port: int) -> list[str]:
    """llama-swap's ``${PORT}`` macro, wherever a token carries it (``--port=${PORT}`` too)."""
    return [tok.replace("${PORT}", str(port)) for tok in argv]


# llama.cpp names each device it loads onto: "... using device CUDA0 (NVIDIA GeForce RTX
# 3060) - 11845 MiB free"; the numbering is the one its *_VISIBLE_DEVICES variable left.
_USING_DEVICE = re.compile(r"\busing device (\w{1,32}) \(([^()]{1,120})\)")
MAX_DEVICES_SEEN = 16


class _Tail:
    """The last lines of the child's output, bounded in count and length, and the devices
    the child said it used."""

    def __init__(self) -> None:
        self.lines: deque[str] = deque(maxlen=LOG_LINES)
        self._partial = b""
        self.closed = anyio.Event()  # the child's output reached its end
        self.devices: list[str] = []

    def device(self) -> str | None:
        return ", ".join(self.devices) or None

    def feed(self, chunk: bytes) -> None:
        data = self._partial + chunk
        *complete, self._partial = data.split(b"\n")
        for raw in complete:
            self._add(raw)
        if len(self._partial) > PARTIAL_CAP:
            self._add(self._partial[:PARTIAL_CAP])
            self._partial = b""

    def _add(self, raw: bytes) -> None:
        line = raw.decode("utf-8", "replace").rstrip("\r")
        line = "".join(ch if ch.isprintable() else "?" for ch in line)
        if line.strip():
            self.lines.append(line[:TAIL_LINE_CHARS])
        used = _USING_DEVICE.search(line)
        if used and len(self.devices) < MAX_DEVICES_SEEN:
            seen = f"{used.group(1)} ({used.group(2).strip()})"
            if seen not in self.devices:
                self.devices.append(seen)

    def text(self, count: int = TAIL_LINES) -> str:
        lines = list(self.lines)
        if self._partial.strip():
            lines = [*lines, self._partial[:TAIL_LINE_CHARS].decode("utf-8", "replace")]
        return " | ".join(lines[-count:])


def _request_for(role: str, model_id: str) -> tuple[str, dict[str, Any]]:
    """One small request that exercises what the model is for."""
    if role == "embedding":
        return "/v1/embeddings", {"model": model_id, "input": "backendmgr verify"}
    if role == "reranker":
        return "/v1/rerank", {
            "model": model_id,
            "query": "which is a fruit",
            "documents": ["apple", "granite"],
        }
    return "/v1/chat/completions", {
        "model": model_id,
        "messages": [{"role": "user", "content": "Say OK."}],
        "max_tokens": 4,
    }


def in_group(pid: int, group: int) -> bool:
    """Whether ``pid`` is in process group ``group`` (a process gone since is not)."""
    try:
        return pid == group or os.getpgid(pid) == group
    except (ProcessLookupError, PermissionError):
        return False


def _parse_smi(text: str, group: int) -> float | None:
    """Sum the MiB of every listed pid in our process group; GiB, None when none is listed."""
    total = 0.0
    seen = False
    for line in text.splitlines()[:4096]:
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 2:
            continue
        try:
            pid, mib = int(parts[0]), float(parts[1])
        except ValueError:
            continue
        if in_group(pid, group):
            total += mib
            seen = True
    return round(total / 1024, 3) if seen else None


async def tool_output(name: str, args: list[str], env: Mapping[str, str]) -> str | None:
    """A GPU tool's output (bounded in time and size); None when absent or failing."""
    exe = shutil.which(name, path=env.get("PATH"))
    if exe is None:
        return None
    try:
        with anyio.fail_after(NVIDIA_SMI_TIMEOUT_S):
            done = await anyio.run_process([exe, *args], check=False, env=dict(env))
    except (OSError, TimeoutError):
        return None
    if done.returncode != 0:
        return None
    return str(done.stdout[:NVIDIA_SMI_CAP].decode("utf-8", "replace"))


async def gpu_memory_gib(group: int, env: Mapping[str, str]) -> float | None:
    """What ``nvidia-smi --query-compute-apps`` reports for the group; None without it."""
    args = ["--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"]
    text = await tool_output("nvidia-smi", args, env)
    return None if text is None else _parse_smi(text, group)


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


async def _stop(process: Process, grace: float) -> None:
    """SIGTERM to the group, SIGKILL after ``grace``; then SIGKILL whatever is left in it."""
    pgid = process.pid
    if os.name != "posix":  # no process groups: the child alone
        if process.returncode is None:
            process.terminate()
            with anyio.move_on_after(grace):
                await process.wait()
        if process.returncode is None:
            process.kill()
        await process.wait()
        return
    if process.returncode is None:
        _signal_group(pgid, signal.SIGTERM)
        with anyio.move_on_after(grace):
            await process.wait()
    _signal_group(pgid, signal.SIGKILL)  # stragglers the leader left behind, or the leader
    await process.wait()


async def _pump(process: Process, tail: _Tail) -> None:
    try:
        if process.stdout is not None:
            with contextlib.suppress(anyio.EndOfStream, anyio.BrokenResourceError, OSError):
                async for chunk in process.stdout:
                    tail.feed(chunk)
    finally:
        tail.closed.set()


def _exited(process: Process, tail: _Tail, count: int = TAIL_LINES) -> str:
    code = process.returncode
    what = f"exited with status {code}" if code is not None and code >= 0 else ""
    if code is not None and code < 0:
        what = f"was killed by signal {-code}"
    said = tail.text(count)
    return f"{what}: {said}" if said else what


async def check_command(
    argv: list[str],
    *,
    role: str,
    model_id: str,
    health_path: str | None = "/health",
    timeout: float = 300.0,
    grace: float = GRACE_S,
    env: Mapping[str, str] | None = None,
    on_start: Callable[[int], None] | None = None,
    measure: Measure | None = None,
    port: int | None = None,
    search_path: str | None = None,
    then: Then | None = None,
) -> CheckResult:
    """Run ``argv`` until it answers one request on ``port``; always stop it.

    Without ``port``, a free one fills ``${PORT}`` in ``argv``; with it, ``argv`` and ``env``
    are final (:func:`.emit.expand.expand`'s). ``search_path`` finds a bare program name as
    Go's ``exec.Command`` does for llama-swap: in the PATH of the caller, not of ``env``.
    ``health_path`` None (llama-swap's ``checkEndpoint: none``) polls the request itself;
    ``measure`` reads the group's memory after the request, while it still runs (``tune``);
    ``then`` is awaited after that with a client on the server (``bench``), its answer kept.
    """
    environ = dict(os.environ if env is None else env)
    if port is None:
        port = free_port()
        command = substitute_port(argv, port)
    else:
        command = list(argv)
    if search_path is not None and "/" not in command[0]:
        found = shutil.which(command[0], path=search_path)
        if found is None:
            reason = f"cannot start {command[0]}: executable file not found in $PATH"
            return CheckResult(False, reason, None, None, None)
        command[0] = found
    base = f"http://127.0.0.1:{port}"
    tail = _Tail()
    started = time.monotonic()
    try:
        process = await open_group(command, env=environ)
    except OSError as exc:
        return CheckResult(False, cannot_start(command, exc), None, None, None)
    if on_start is not None:
        on_start(process.pid)
    path, body = _request_for(role, model_id)
    async with anyio.create_task_group() as tg:
        tg.start_soon(_pump, process, tail)
        try:
            result = await _exercise(
                process, tail, base, health_path, path, body, timeout, started, environ
            )
            if result.ok and measure is not None:
                result = dataclasses.replace(result, measured=await measure(process.pid, environ))
            if result.ok and then is not None:
                async with httpx.AsyncClient(base_url=base, trust_env=False) as client:
                    result = dataclasses.replace(result, then=await then(client))
        finally:
            async with undoing():  # a second Ctrl-C must not leave it running
                await _stop(process, grace)
                tg.cancel_scope.cancel()  # a grandchild outside the group may hold the pipe
                await process.aclose()
    return result


class Unusable(Exception):
    """A started server's answer that cannot be used: too large, or not whole in time."""


async def bounded_answer(
    client: httpx.AsyncClient,
    method: str,
    path: str,
    *,
    within: float,
    json: Any = None,
    cap: int = ANSWER_CAP,
) -> tuple[int, bytes]:
    """The status and body of one request to a server we started, in at most ``within``
    seconds in all (httpx's timeout is per read: a server that drips a byte a second would
    outlive it) and at most ``cap`` bytes of body; :class:`Unusable` or an
    ``httpx.HTTPError`` otherwise."""
    with anyio.move_on_after(within):
        async with client.stream(method, path, json=json, timeout=within) as answer:
            body = bytearray()
            async for chunk in answer.aiter_bytes():
                body += chunk
                if len(body) > cap:
                    raise Unusable(f"{path} answered more than {cap >> 10} KiB")
            return answer.status_code, bytes(body)
    raise Unusable(f"{path}: no whole answer within {within:g} s")


async def _exercise(
    process: Process,
    tail: _Tail,
    base: str,
    health_path: str | None,
    path: str,
    body: dict[str, Any],
    timeout: float,
    started: float,
    environ: Mapping[str, str],
) -> CheckResult:
    """Wait for health within ``timeout``, then send the request; the child still runs."""
    deadline = started + timeout
    probe = health_path or path
    async with httpx.AsyncClient(base_url=base, trust_env=False, timeout=5.0) as client:
        while True:
            if process.returncode is not None:
                with anyio.move_on_after(1.0):  # let the pump read the last lines
                    await tail.closed.wait()
                return CheckResult(
                    False,
                    _exited(process, tail),
                    None,
                    None,
                    process.pid,
                    log=_exited(process, tail, LOG_LINES),
                )
            if time.monotonic() > deadline:
                return CheckResult(
                    False, f"not healthy within {timeout:g} s", None, None, process.pid
                )
            try:
                within = max(0.1, min(HEALTH_WAIT_S, deadline - time.monotonic()))
                method, sent = ("GET", None) if health_path else ("POST", body)
                status, _ = await bounded_answer(client, method, probe, within=within, json=sent)
                if status == 200:
                    break
            except (httpx.HTTPError, Unusable):
                pass
            with anyio.move_on_after(POLL_S):
                await process.wait()
        ready = round(time.monotonic() - started, 2)
        try:
            remaining = max(5.0, deadline - time.monotonic())
            status, said = await bounded_answer(client, "POST", path, within=remaining, json=body)
        except Unusable as exc:
            return CheckResult(False, str(exc), ready, None, process.pid)
        except httpx.HTTPError as exc:
            reason = f"{path}: {type(exc).__name__} {exc}".strip()
            return CheckResult(False, reason, ready, None, process.pid)
        if status >= 400:
            text = _shown(said)
            reason = f"HTTP {status} from {path}" + (f": {text}" if text else "")
            return CheckResult(False, reason, ready, None, process.pid)
        if not _json_object(said):  # a 200 of an HTML page or a proxy's text serves nothing
            text = _shown(said)
            reason = f"HTTP {status} from {path} is no JSON answer" + (f": {text}" if text else "")
            return CheckResult(False, reason, ready, None, process.pid)
        gpu = await gpu_memory_gib(process.pid, environ)
        return CheckResult(True, None, ready, gpu, process.pid, tail.device())


def _shown(body: bytes) -> str:
    """The start of an answer's body as one line, for a reason."""
    return " ".join(body[: BODY_CHARS * 4].decode(errors="replace")[:BODY_CHARS].split())


def _json_object(body: bytes) -> bool:
    """Whether ``body`` (bounded by :func:`bounded_answer`) is one JSON object, as every
    answer of the OpenAI-style API is."""
    import json

    try:
        return isinstance(json.loads(body), dict)
    except (ValueError, RecursionError):  # not JSON, not UTF-8, a digit string too long
        return False
