"""Run a build's ``--help`` (and llama-server's ``--list-devices``) once and keep what it says
(SPEC §19). A probe never fails an install: a program that hangs, crashes or floods its output
is recorded as "capabilities unknown", with the reason.

Output is read through a bounded buffer (:data:`MAX_OUTPUT`) and the program is killed at the
timeout or when the buffer is full, so a hostile or broken executable costs at most that.
:func:`run_in_group` is the one way the installer runs a build's executable (the smoke check
uses it too): own process group, bounded output, the whole group stopped on every way out.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from pathlib import Path

import anyio
from anyio.abc import ByteReceiveStream

from .._proc import KILL_GRACE_S, open_group, stop_group
from ..catalog.capabilities import Capabilities, parse_capabilities, parse_options
from ..immutable import frozen

__all__ = [
    "MAX_OUTPUT",
    "TIMEOUT_S",
    "Finished",
    "ProbeError",
    "probe_build",
    "probe_build_sync",
    "probe_note",
    "run_bounded",
    "run_in_group",
]

TIMEOUT_S = 10.0
MAX_OUTPUT = 1 << 20
LIST_DEVICES = "--list-devices"

TAIL_BYTES = 4096


class ProbeError(Exception):
    """Why a run gave no usable output (shown in ``capabilities.error``)."""


@frozen
class Finished:
    """How a run ended: exit status (None when stopped for printing too much), the first
    ``limit`` bytes of each stream and its last :data:`TAIL_BYTES` (where errors are)."""

    code: int | None
    out: bytes
    err: bytes
    out_tail: bytes
    err_tail: bytes
    overflowed: bool


class _Kept:
    """One output stream, bounded: its head up to a limit and a short tail."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.head = bytearray()
        self.tail = bytearray()
        self.overflowed = False

    def add(self, chunk: bytes) -> None:
        room = self.limit - len(self.head)
        self.head += chunk[: max(room, 0)]
        self.overflowed = self.overflowed or len(chunk) > room
        self.tail = (self.tail + chunk)[-TAIL_BYTES:]


async def run_in_group(
    argv: Sequence[str],
    *,
    timeout: float,
    limit: int = MAX_OUTPUT,
    merge: bool = True,
    stop_when_full: bool = True,
    grace: float = KILL_GRACE_S,
) -> Finished:
    """Run a program we do not trust (a build's executable) in its own process group, reading
    at most ``limit`` bytes per stream (stderr joins stdout when ``merge``); with
    ``stop_when_full`` the first byte past ``limit`` ends the run, otherwise the rest is drained
    and dropped. Raise :class:`OSError` when it cannot start and :class:`TimeoutError` after
    ``timeout``. On every way out (exit, timeout, overflow, cancel, KeyboardInterrupt) the
    group gets SIGTERM, then SIGKILL after ``grace`` seconds."""
    process = await open_group(argv, merge=merge)  # its helpers are stopped with it
    streams = [(process.stdout, _Kept(limit))]
    if not merge:
        streams.append((process.stderr, _Kept(limit)))
    code: int | None = None
    try:
        with anyio.fail_after(timeout):
            async with anyio.create_task_group() as tg:

                async def drain(stream: ByteReceiveStream | None, kept: _Kept) -> None:
                    assert stream is not None
                    while True:
                        try:
                            chunk = await stream.receive(65536)
                        except (
                            anyio.EndOfStream,
                            anyio.ClosedResourceError,
                            anyio.BrokenResourceError,
                        ):
                            return
                        kept.add(chunk)
                        if kept.overflowed and stop_when_full:
                            tg.cancel_scope.cancel()
                            return

                for stream, kept in streams:
                    tg.start_soon(drain, stream, kept)
            if not any(kept.overflowed for _, kept in streams) or not stop_when_full:
                code = await process.wait()
    finally:
        await stop_group(process, grace)
    out = streams[0][1]
    err = streams[1][1] if len(streams) > 1 else _Kept(0)
    return Finished(
        code,
        bytes(out.head),
        bytes(err.head),
        bytes(out.tail),
        bytes(err.tail),
        out.overflowed or err.overflowed,
    )


async def run_bounded(
    argv: list[str], *, timeout: float = TIMEOUT_S, limit: int = MAX_OUTPUT
) -> str:
    """stdout and stderr of one run, at most ``limit`` bytes; raise :class:`ProbeError` on a
    timeout, a start failure, too much output or a non-zero exit. The program and what it
    started are stopped on every way out (:func:`run_in_group`)."""
    try:
        done = await run_in_group(argv, timeout=timeout, limit=limit)
    except TimeoutError as exc:  # before OSError, whose subclass it is
        raise ProbeError(f"did not finish within {round(timeout, 1):g} s") from exc
    except OSError as exc:
        raise ProbeError(f"cannot run ({exc.strerror or exc})") from exc
    if done.overflowed:
        raise ProbeError(f"printed more than {limit >> 20} MiB")
    if done.code != 0:
        raise ProbeError(f"exit status {done.code}")
    return done.out.decode("utf-8", "replace")


async def probe_build(
    exe: Path,
    *,
    version: Callable[[], Awaitable[str | None]] | None = None,
    timeout: float | None = None,
    devices_early: bool = False,
) -> Capabilities:
    """``exe --help`` and, when the help lists it, ``exe --list-devices``, with ``version``
    running alongside (default ``exe --version``; an install passes its smoke check). Each run
    of a GPU build loads its libraries (hundreds of ms), so the runs do not queue behind each
    other (issue 34). Never raises for what the program does in the probe's own runs;
    ``version``'s exception (the smoke check's refusal) stops them and goes through unchanged,
    so a build that failed it gets no capabilities. ``timeout`` (default :data:`TIMEOUT_S`)
    bounds the probe's runs together, not each run: a program that hangs costs it once
    (issue 20: 10 s, not 10 s per run); ``version`` keeps its own bound. ``devices_early``
    (a llama.cpp build: recent ones list it, older ones refuse it at once): ``--list-devices``
    starts with ``--help`` instead of after it, stopped and forgotten if the help does not
    list it."""
    errors: dict[str, str] = {}
    limit = TIMEOUT_S if timeout is None else timeout
    deadline = anyio.current_time() + limit

    async def run(*args: str) -> str | None:
        left = deadline - anyio.current_time()
        try:
            if left <= 0:
                raise ProbeError(f"not run: the probe's {limit:g} s were spent")
            return await run_bounded([str(exe), *args], timeout=left)
        except ProbeError as exc:
            errors[args[0]] = f"{' '.join(args)}: {exc}"
            return None

    said: dict[str, str | None] = {}

    async def list_devices() -> None:
        said[LIST_DEVICES] = await run(LIST_DEVICES)

    async def read_help() -> None:
        async with anyio.create_task_group() as tg:
            if devices_early:
                tg.start_soon(list_devices)
            help_text = said["--help"] = await run("--help")
            listed = LIST_DEVICES in parse_options(help_text) if help_text else False
            if not listed:  # a flag the program does not list: its early run stops, unheard
                tg.cancel_scope.cancel()
            elif not devices_early:
                await list_devices()
        if not listed:
            said.pop(LIST_DEVICES, None)
            errors.pop(LIST_DEVICES, None)

    failed: Exception | None = None
    async with anyio.create_task_group() as tg:
        tg.start_soon(read_help)
        try:
            said["--version"] = await (version or partial(run, "--version"))()
        except Exception as exc:  # re-raised as it is, not wrapped in a group
            failed = exc
            tg.cancel_scope.cancel()
    if failed is not None:
        raise failed
    ordered = [errors[arg] for arg in ("--help", LIST_DEVICES, "--version") if arg in errors]
    return parse_capabilities(
        said.get("--help"),
        said.get("--version"),
        said.get(LIST_DEVICES),
        error="; ".join(ordered) if ordered else None,
    )


def probe_note(exe: Path | str, timeout: float | None = None) -> str:
    """What a probe of ``exe`` waits for, said before it starts (issue 20)."""
    limit = TIMEOUT_S if timeout is None else timeout
    return f"probing {exe} --help (at most {limit:g} s)…"


def probe_build_sync(exe: Path, *, timeout: float | None = None) -> Capabilities:
    """:func:`probe_build` from synchronous code (a worker thread with no event loop)."""
    try:
        return anyio.run(lambda: probe_build(exe, timeout=timeout))
    except RuntimeError as exc:  # called inside a running loop: say so, do not guess
        return Capabilities(error=f"not probed ({exc})")
