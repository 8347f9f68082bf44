"""The client reads a response's body up to 1 MiB at a time (issue 34): httpcore's own reads
are 64 KiB, asyncio's socket transport's 256 KiB, and each read costs a pass through httpcore,
h11, httpx, anyio and asyncio in Python."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import anyio
import httpcore

from backendmgr._wide_reads import READ_BYTES, TLS_READ_BYTES, WideStream
from backendmgr.mirror import MirrorServer
from backendmgr.net import NetSettings, make_client

HTTPCORE_READ = 64 << 10
ASYNCIO_READ = 256 << 10


def test_a_download_reads_wider_than_httpcore_and_gets_every_byte(
    mirror: MirrorServer, mirror_root: Path
) -> None:
    """After a pause the socket holds more than 256 KiB: one read takes more than httpcore's
    own read, or asyncio's ``recv``, would (never more than the wide read), and the bytes are
    the file's, in order."""
    folder = mirror_root / "me" / "tool" / "v1"
    folder.mkdir(parents=True)
    data = os.urandom(4 << 20)
    (folder / "big.bin").write_bytes(data)
    url = f"{mirror.base_url}/download/me/tool/v1/big.bin"

    async def fetch() -> list[bytes]:
        chunks: list[bytes] = []
        async with (
            make_client(NetSettings.from_env()) as client,
            client.stream("GET", url) as response,
        ):
            assert response.status_code == 200
            async for chunk in response.aiter_raw():
                if not chunks:
                    await anyio.sleep(0.2)  # the server fills the socket's buffer
                chunks.append(chunk)
        return chunks

    chunks = anyio.run(fetch)
    got = b"".join(chunks)
    assert hashlib.sha256(got).digest() == hashlib.sha256(data).digest()
    sizes = [len(c) for c in chunks]
    assert max(sizes) > max(HTTPCORE_READ, ASYNCIO_READ)
    assert max(sizes) <= READ_BYTES


def _transport_read_size(stream: WideStream) -> int:
    """What the connection's asyncio transport ``recv``s at a time (the names _wide_reads
    looks up: should they change, this fails rather than the reads narrowing unseen)."""
    size = stream._inner._stream._transport.max_size  # type: ignore[attr-defined]
    assert isinstance(size, int)
    return size


def test_a_plain_connection_is_widened_at_its_first_read_and_a_tls_one_never(
    mirror: MirrorServer,
) -> None:
    """httpcore starts TLS before it reads: a plain connection's transport gets the wide
    ``recv`` at its first read, and a stream over TLS keeps asyncio's (anyio's TLS stream
    reads it 64 KiB at a time, copying the rest of a larger chunk each time)."""
    host, port = "127.0.0.1", int(mirror.base_url.rsplit(":", 1)[1])
    request = f"GET /nothing HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode()

    async def sizes(tls: bool) -> tuple[int, int]:
        inner = await httpcore.AnyIOBackend().connect_tcp(host, port)
        stream = WideStream(inner, tls=tls)
        try:
            before = _transport_read_size(stream)
            await stream.write(request)
            assert await stream.read(64 << 10)
            return before, _transport_read_size(stream)
        finally:
            await stream.aclose()

    assert anyio.run(sizes, False) == (ASYNCIO_READ, READ_BYTES)
    assert TLS_READ_BYTES == ASYNCIO_READ
    assert anyio.run(sizes, True) == (ASYNCIO_READ, ASYNCIO_READ)
