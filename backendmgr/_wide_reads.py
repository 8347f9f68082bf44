"""httpx's transport with its connections reading the socket 1 MiB at a time (issue 34).

httpcore asks its stream for 64 KiB per read, and each read costs a pass through httpcore, h11,
httpx, anyio and asyncio in Python (two ``epoll_ctl`` calls too: anyio resumes and pauses the
transport's reading around every read). An 87 MiB download took 1 392 reads at 64 KiB;
asyncio's socket transport then caps each ``recv`` at 256 KiB (350 reads, 0.28 s of CPU on the
event loop's thread, which the unpacking threads compete with for the GIL and the two cores);
at 1 MiB (about 90 reads from a loopback mirror) the same download takes 0.19-0.20 s of CPU.
httpcore has no option for it, and its class is not ours to change for the whole process: the
transport's pool gets a network backend (httpcore's public interface) whose streams ask for
more, and whose connections' asyncio transport is told to ``recv`` as much (``max_size``, a
class attribute set on the one transport). httpx offers no argument for the pool's backend, so
it is set on the pool the transport made (``_pool``, ``_network_backend``, ``_stream``,
``_transport``: private names, looked up with care; where a version of httpx, httpcore, anyio
or asyncio names them otherwise, reads stay narrower). A read still returns what the socket
has, at most 1 MiB, and h11 takes any amount; every bound on a response (size, time, redirects)
is its caller's, as before. Over TLS nothing changes (:data:`TLS_READ_BYTES`). Imported when
the first transport is made (net.py).
"""

from __future__ import annotations

import ssl
from collections.abc import Iterable
from typing import Any

import httpcore
import httpx

__all__ = ["READ_BYTES", "wide_reads"]

READ_BYTES = 1 << 20
TLS_READ_BYTES = 256 << 10
"""Over TLS, reads and the transport's ``recv`` stay as they were (asyncio's 256 KiB): anyio's
TLS stream reads its transport 64 KiB at a time and copies what is left of a larger chunk at
each of those reads, so a 1 MiB ``recv`` would cost ~7 copies of every byte instead of ~1.5."""


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


def _widen(stream: httpcore.AsyncNetworkStream) -> None:
    """Have the connection's asyncio transport ``recv`` up to :data:`READ_BYTES` at a time
    (256 KiB otherwise): httpcore's anyio stream, its anyio socket stream, its transport."""
    transport: Any = getattr(getattr(stream, "_stream", None), "_transport", None)
    size = getattr(transport, "max_size", None)
    if isinstance(size, int) and size < READ_BYTES:
        transport.max_size = READ_BYTES


class WideStream(httpcore.AsyncNetworkStream):
    """A connection's stream, each read asking for at least :data:`READ_BYTES`; a plain one's
    transport is widened at its first read (httpcore starts TLS before it reads anything, and
    a TLS stream keeps :data:`TLS_READ_BYTES`)."""

    def __init__(self, inner: httpcore.AsyncNetworkStream, *, tls: bool = False) -> None:
        self._inner = inner
        self._wide = TLS_READ_BYTES if tls else READ_BYTES
        self._to_widen = not tls

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        if self._to_widen:
            self._to_widen = False
            _widen(self._inner)
        return await self._inner.read(max(max_bytes, self._wide), timeout)

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
        self._to_widen = False  # its transport is read by the TLS stream (TLS_READ_BYTES)
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
