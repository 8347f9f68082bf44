"""``doctor`` asks the real llama-swap to load the written config (issue 28): no schema or
port of its loader is its parser. A short-lived process on a free loopback port, a bounded
wait for ``/v1/models`` or for its exit, then its process group is killed by pid."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections import deque
from pathlib import Path

import anyio
import httpx

from .._proc import cannot_start, open_group
from ..errors import escaped
from ..immutable import frozen

__all__ = ["TRIAL_S", "Trial", "trial_load"]

TRIAL_S = 10.0  # llama-swap loads a config in milliseconds; this bounds a stuck one
GRACE_S = 5.0
_KEEP = 8  # lines of its output kept for the verdict
_LINE = 400


@frozen
class Trial:
    loaded: bool
    detail: str  # the models it listed, or why it refused


def _signal_group(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


async def _stop(process: anyio.abc.Process) -> None:
    """SIGTERM to its group (llama-swap stops the model servers a preload started), then
    SIGKILL after a grace; waited for, shielded from a cancel."""
    with anyio.CancelScope(shield=True):
        _signal_group(process.pid, signal.SIGTERM)
        with anyio.move_on_after(GRACE_S):
            await process.wait()
            return
        _signal_group(process.pid, signal.SIGKILL)
        with anyio.move_on_after(GRACE_S):
            await process.wait()


async def trial_load(exe: Path, config: Path, *, timeout: float = TRIAL_S) -> Trial:
    """Start ``exe -config CONFIG`` on a free loopback port until it lists its models or
    exits; never longer than ``timeout`` seconds."""
    from ..serve_check import free_port

    port = free_port()
    argv = [str(exe), "-config", str(config), "-listen", f"127.0.0.1:{port}"]
    try:
        process = await open_group(argv)
    except OSError as exc:
        return Trial(False, cannot_start(argv, exc))
    tail: deque[str] = deque(maxlen=_KEEP)

    async def pump() -> None:
        assert process.stdout is not None
        buf = b""
        async for chunk in process.stdout:
            buf = (buf + chunk)[-(1 << 16) :]
            *lines, buf = buf.split(b"\n")
            tail.extend(escaped(ln.decode("utf-8", "replace"), _LINE) for ln in lines if ln)
        if buf:
            tail.append(escaped(buf.decode("utf-8", "replace"), _LINE))

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(pump)
            verdict = await _watch(process, f"http://127.0.0.1:{port}/v1/models", tail, timeout)
            tg.cancel_scope.cancel()
    finally:
        await _stop(process)
    return verdict


async def _watch(process: anyio.abc.Process, url: str, tail: deque[str], timeout: float) -> Trial:
    deadline = time.monotonic() + timeout
    async with httpx.AsyncClient(trust_env=False, timeout=1.0) as client:
        while time.monotonic() < deadline:
            if process.returncode is not None:
                await anyio.sleep(0.05)  # its last words
                why = next((ln for ln in reversed(tail) if "error" in ln.lower()), None)
                return Trial(False, why or (tail[-1] if tail else f"exit {process.returncode}"))
            with contextlib.suppress(httpx.HTTPError, ValueError):
                answer = await client.get(url)
                if answer.status_code == 200:
                    ids = sorted(str(m.get("id")) for m in answer.json().get("data", []))
                    return Trial(True, f"{len(ids)} models")
            await anyio.sleep(0.05)
    return Trial(False, f"it did not answer within {timeout:g} s")
