"""Run a build's ``--help`` (and llama-server's ``--list-devices``) once and keep what it says
(SPEC §19). A probe never fails an install: a program that hangs, crashes or floods its output
is recorded as "capabilities unknown", with the reason.

Output is read through a bounded buffer (:data:`MAX_OUTPUT`) and the program is killed at the
timeout or when the buffer is full, so a hostile or broken executable costs at most that.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
from pathlib import Path
from typing import Any

import anyio
from pydantic import ValidationError

from .._fs import atomic_write_bytes
from ..catalog.capabilities import Capabilities, parse_capabilities, parse_options

__all__ = [
    "MAX_OUTPUT",
    "TIMEOUT_S",
    "CapabilityCache",
    "probe_build",
    "probe_build_sync",
    "run_bounded",
]

TIMEOUT_S = 10.0
MAX_OUTPUT = 1 << 20
LIST_DEVICES = "--list-devices"


class ProbeError(Exception):
    """Why a run gave no usable output (shown in ``capabilities.error``)."""


def _kill_group(pid: int) -> None:
    """Kill what the program started in its session too (a shell script's children), so no
    probe leaves a process behind or holds the output pipe open."""
    if os.name == "posix":
        with contextlib.suppress(OSError):
            os.killpg(pid, signal.SIGKILL)


async def run_bounded(
    argv: list[str], *, timeout: float = TIMEOUT_S, limit: int = MAX_OUTPUT
) -> str:
    """stdout and stderr of one run, at most ``limit`` bytes; raise :class:`ProbeError` on a
    timeout, a start failure or a non-zero exit. The child is killed on every way out."""
    try:
        process = await anyio.open_process(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=os.name == "posix",  # its helpers are killed with it
        )
    except OSError as exc:
        raise ProbeError(f"cannot run ({exc.strerror or exc})") from exc
    buf = bytearray()
    try:
        with anyio.move_on_after(timeout) as scope:
            assert process.stdout is not None
            while len(buf) < limit:
                try:
                    chunk = await process.stdout.receive(65536)
                except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
                    break
                buf += chunk[: limit - len(buf)]
            if len(buf) >= limit:
                raise ProbeError(f"printed more than {limit >> 20} MiB")
            code = await process.wait()
        if scope.cancelled_caught:
            raise ProbeError(f"did not finish within {timeout:.0f} s")
    finally:
        _kill_group(process.pid)
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            with anyio.CancelScope(shield=True), anyio.move_on_after(5):
                await process.wait()
        with anyio.CancelScope(shield=True):
            await process.aclose()
    if code != 0:
        raise ProbeError(f"exit status {code}")
    return buf.decode("utf-8", "replace")


async def probe_build(
    exe: Path, *, version_text: str | None = None, timeout: float | None = None
) -> Capabilities:
    """``exe --help``, ``exe --list-devices`` when the help lists it, and ``exe --version``
    when the smoke check's output is not given; never raises for what the program does."""
    errors: list[str] = []
    limit = TIMEOUT_S if timeout is None else timeout

    async def run(*args: str) -> str | None:
        try:
            return await run_bounded([str(exe), *args], timeout=limit)
        except ProbeError as exc:
            errors.append(f"{' '.join(args)}: {exc}")
            return None

    help_text = await run("--help")
    devices = None
    if help_text and LIST_DEVICES in parse_options(help_text):
        devices = await run(LIST_DEVICES)
    if version_text is None:
        version_text = await run("--version")
    return parse_capabilities(
        help_text, version_text, devices, error="; ".join(errors) if errors else None
    )


def probe_build_sync(exe: Path, *, timeout: float | None = None) -> Capabilities:
    """:func:`probe_build` from synchronous code (a worker thread with no event loop)."""
    try:
        return anyio.run(lambda: probe_build(exe, timeout=timeout))
    except RuntimeError as exc:  # called inside a running loop: say so, do not guess
        return Capabilities(error=f"not probed ({exc})")


# --- manual rows: probed on first use, cached by (path, size, mtime) -----------------------

CACHE_FORMAT = 1
MAX_CACHE_BYTES = 8 << 20
MAX_CACHE_ENTRIES = 64


def _stat_key(path: str) -> tuple[str, int, int] | None:
    """The executable a row names (a bare name is looked up on PATH) and its size and mtime."""
    found = path if os.sep in path or (os.altsep and os.altsep in path) else shutil.which(path)
    if not found:
        return None
    try:
        st = os.stat(found)
    except OSError:
        return None
    return (
        (str(Path(found).absolute()), st.st_size, st.st_mtime_ns) if os.path.isfile(found) else None
    )


class CapabilityCache:
    """``<home>/cache/capabilities.json``: bounded in size and entries, replaced atomically; a
    file that is too big or malformed is ignored (it only costs a probe)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.entries: dict[str, list[Any]] = {}
        self.dirty = False
        try:
            with path.open("rb") as fh:
                raw = fh.read(MAX_CACHE_BYTES + 1)
            data = json.loads(raw) if len(raw) <= MAX_CACHE_BYTES else None
            if isinstance(data, dict) and data.get("format") == CACHE_FORMAT:
                entries = data.get("entries")
                if isinstance(entries, dict):
                    self.entries = {
                        k: v
                        for k, v in entries.items()
                        if isinstance(v, list) and len(v) == 3 and isinstance(v[2], dict)
                    }
        except (OSError, ValueError):
            self.entries = {}

    def get(self, key: tuple[str, int, int]) -> Capabilities | None:
        entry = self.entries.get(key[0])
        if not entry or entry[0] != key[1] or entry[1] != key[2]:
            return None
        try:
            return Capabilities.model_validate(entry[2])
        except ValidationError:
            return None

    def put(self, key: tuple[str, int, int], caps: Capabilities) -> None:
        self.entries.pop(key[0], None)
        self.entries[key[0]] = [key[1], key[2], caps.model_dump(mode="json")]
        while len(self.entries) > MAX_CACHE_ENTRIES:  # oldest insertion goes first
            del self.entries[next(iter(self.entries))]
        self.dirty = True

    def save(self) -> None:
        if not self.dirty:
            return
        payload = json.dumps({"format": CACHE_FORMAT, "entries": self.entries}).encode()
        if len(payload) > MAX_CACHE_BYTES:
            return
        with contextlib.suppress(OSError):  # a cache that cannot be written only costs time
            atomic_write_bytes(self.path, payload)
        self.dirty = False

    def lookup(self, path: str, *, timeout: float | None = None) -> Capabilities | None:
        """Cached capabilities of the executable at ``path``, probing it when its size or
        mtime changed; None when there is no such executable."""
        key = _stat_key(path)
        if key is None:
            return None
        cached = self.get(key)
        if cached is not None:
            return cached
        caps = probe_build_sync(Path(key[0]), timeout=timeout)
        self.put(key, caps)
        return caps
