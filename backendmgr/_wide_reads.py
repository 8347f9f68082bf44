"""httpx's transport: its connections read 256 KiB at a time, a download's raw body 1 MiB.

Issue 34: httpcore asks its stream for 64 KiB per read, and each read costs a pass through
httpcore, h11, httpx, anyio and asyncio in Python (two ``epoll_ctl`` calls too: anyio resumes
and pauses the transport's reading around every read): an 87 MiB download took 1 392 reads.
Every read here asks for 256 KiB, asyncio's own ``recv`` size (350 reads, 0.28 s of CPU on the
event loop's thread, which the unpacking threads compete with for the two cores). A body read
raw (an asset's download: :func:`raw_reads`) over a plain connection asks for 1 MiB, and its
connection's asyncio transport is told to ``recv`` as much (``max_size``, a class attribute set
on the one transport, put back after): about 90 reads from a loopback mirror, 0.19-0.20 s of
CPU. Not for a body that httpx decodes (a listing), where one gzip chunk may expand a
thousandfold in one call before a bound sees it, nor over TLS (:data:`READ_BYTES`).

httpcore has no option for it, and its class is not ours to change for the whole process: the
transport's pool gets a network backend (httpcore's public interface) whose streams ask for
more. httpx offers no argument for the pool's backend, so it is set on the pool the transport
made (``_pool``, ``_network_backend``, and for the transport ``_stream``, ``_transport``:
private names, looked up with care; where a version of httpx, httpcore, anyio or asyncio names
them otherwise, reads stay narrower). A read still returns what the socket has, and h11 takes
any amount; every bound on a response (size, time, redirects) is its caller's, as before.
Imported when the first transport is made (net.py).
"""

from __future__ import annotations

import contextlib
import ssl
from collections.abc import Iterable, Iterator
from typing import Any

import httpcore
import httpx

__all__ = ["READ_BYTES", "WIDE_RAW_BYTES", "raw_reads", "wide_reads"]

READ_BYTES = 256 << 10
"""What every read asks for: asyncio's own ``recv`` size, and what anyio's TLS stream takes well
(it reads its transport 64 KiB at a time and copies what is left of a larger chunk at each of
those reads)."""
WIDE_RAW_BYTES = 1 << 20
"""What a body read raw asks for, on a plain connection (:func:`raw_reads`)."""


def wide_reads(transport: httpx.AsyncHTTPTransport) -> httpx.AsyncHTTPTransport:
    """``transport``, its direct connections made by :class:`WideBackend` (a proxy's pool,
    which httpx makes otherwise, keeps httpcore's reads)."""
    pool = getattr(transport, "_pool", None)
    inner = getattr(pool, "_network_backend", None)
    if isinstance(pool, httpcore.AsyncConnectionPool) and isinstance(
        inner, httpcore.AsyncNetworkBackend
    ):
        pool._network_backend = WideBackend(inner)
    return transport


@contextlib.contextmanager
def raw_reads(response: httpx.Response) -> Iterator[None]:
    """Read ``response``'s body :data:`WIDE_RAW_BYTES` at a time in the block, for a body
    read raw (``aiter_raw``) over a plain connection; the connection reads as before once the
    block ends, whatever it is used for next. Never for a body that httpx decodes: one chunk
    of gzip may expand a thousandfold in a single call, before any bound of ours sees it."""
    stream = response.extensions.get("network_stream")
    if not isinstance(stream, WideStream):
        yield
        return
    stream.widen(True)
    try:
        yield
    finally:
        stream.widen(False)


class WideStream(httpcore.AsyncNetworkStream):
    """A connection's stream, each read asking for at least :data:`READ_BYTES`, or
    :data:`WIDE_RAW_BYTES` while :func:`raw_reads` widens a plain one."""

    def __init__(self, inner: httpcore.AsyncNetworkStream, *, tls: bool = False) -> None:
        self._inner = inner
        self._tls = tls
        self._ask = READ_BYTES
        self._recv: int | None = None  # the transport's own recv size, while widened

    def widen(self, on: bool) -> None:
        """Ask for (and have the connection's asyncio transport ``recv``) up to
        :data:`WIDE_RAW_BYTES` at a time, or as before. A stream over TLS stays as it is;
        so does one whose transport is not where httpcore's anyio stream, its anyio socket
        stream and asyncio keep it (``_stream``, ``_transport``, ``max_size``)."""
        if self._tls:
            return
        transport: Any = getattr(getattr(self._inner, "_stream", None), "_transport", None)
        recv = getattr(transport, "max_size", None)
        if not isinstance(recv, int):
            return
        if on and self._recv is None:
            self._recv, transport.max_size, self._ask = recv, WIDE_RAW_BYTES, WIDE_RAW_BYTES
        elif not on and self._recv is not None:
            transport.max_size, self._ask, self._recv = self._recv, READ_BYTES, None

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return await self._inner.read(max(max_bytes, self._ask), timeout)

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        await self._inner.write(buffer, timeout)

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.AsyncNetworkStream:
        tls = await self._inner.start_tls(ssl_context, server_hostname, timeout)
        return WideStream(tls, tls=True)

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class WideBackend(httpcore.AsyncNetworkBackend):
    """httpcore's own backend, its streams wrapped in :class:`WideStream`."""

    def __init__(self, inner: httpcore.AsyncNetworkBackend) -> None:
        self._inner = inner

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        stream = await self._inner.connect_tcp(
            host, port, timeout=timeout, local_address=local_address, socket_options=socket_options
        )
        return WideStream(stream)

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.AsyncNetworkStream:
        stream = await self._inner.connect_unix_socket(
            path, timeout=timeout, socket_options=socket_options
        )
        return WideStream(stream)

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)
