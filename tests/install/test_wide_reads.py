"""The client reads a response's body 256 KiB at a time, and a body read raw (a download) 1 MiB
(issue 34): httpcore's own reads are 64 KiB, asyncio's socket transport's 256 KiB, and each
read costs a pass through httpcore, h11, httpx, anyio and asyncio in Python."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import anyio
import httpcore

from backendmgr._wide_reads import READ_BYTES, WIDE_RAW_BYTES, WideStream, raw_reads
from backendmgr.mirror import MirrorServer
from backendmgr.net import NetSettings, make_client

HTTPCORE_READ = 64 << 10
ASYNCIO_READ = 256 << 10


def _chunk_sizes(mirror: MirrorServer, mirror_root: Path, *, raw: bool) -> list[int]:
    """Download 4 MiB, pausing after the first piece (the server fills the socket's buffer):
    the size of every piece, the bytes checked to be the file's, in order."""
    folder = mirror_root / "me" / "tool" / "v1"
    folder.mkdir(parents=True, exist_ok=True)
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
            if raw:
                with raw_reads(response):
                    async for chunk in response.aiter_raw():
                        if not chunks:
                            await anyio.sleep(0.2)
                        chunks.append(chunk)
            else:
                async for chunk in response.aiter_bytes():
                    if not chunks:
                        await anyio.sleep(0.2)
                    chunks.append(chunk)
        return chunks

    chunks = anyio.run(fetch)
    assert hashlib.sha256(b"".join(chunks)).digest() == hashlib.sha256(data).digest()
    return [len(c) for c in chunks]


def test_a_download_reads_wider_than_asyncio_and_gets_every_byte(
    mirror: MirrorServer, mirror_root: Path
) -> None:
    """Read raw, one read takes more than httpcore's own read, or asyncio's ``recv``, would
    (never more than the wide read)."""
    sizes = _chunk_sizes(mirror, mirror_root, raw=True)
    assert max(HTTPCORE_READ, ASYNCIO_READ) < max(sizes) <= WIDE_RAW_BYTES


def test_a_decoded_body_is_read_no_wider_than_asyncio_reads(
    mirror: MirrorServer, mirror_root: Path
) -> None:
    """A body httpx decodes (a listing, which may come gzipped) is read as asyncio reads:
    one chunk of gzip can expand a thousandfold in a single call before any bound sees it."""
    sizes = _chunk_sizes(mirror, mirror_root, raw=False)
    assert HTTPCORE_READ < max(sizes) <= READ_BYTES == ASYNCIO_READ


def _transport_read_size(stream: WideStream) -> int:
    """What the connection's asyncio transport ``recv``s at a time (the names _wide_reads
    looks up: should they change, this fails rather than the reads narrowing unseen)."""
    size = stream._inner._stream._transport.max_size  # type: ignore[attr-defined]
    assert isinstance(size, int)
    return size


def test_a_plain_connection_is_widened_only_for_its_raw_read_and_a_tls_one_never(
    mirror: MirrorServer,
) -> None:
    """The connection reads as before once the raw read ends (it may serve a listing next);
    a stream over TLS is never widened (anyio's TLS stream reads its transport 64 KiB at a
    time, copying the rest of a larger chunk each time)."""
    host, port = "127.0.0.1", int(mirror.base_url.rsplit(":", 1)[1])

    async def sizes(tls: bool) -> list[int]:
        stream = WideStream(await httpcore.AnyIOBackend().connect_tcp(host, port), tls=tls)
        try:
            seen = [_transport_read_size(stream)]
            stream.widen(True)
            seen.append(_transport_read_size(stream))
            stream.widen(False)
            seen.append(_transport_read_size(stream))
            return seen
        finally:
            await stream.aclose()

    assert anyio.run(sizes, False) == [ASYNCIO_READ, WIDE_RAW_BYTES, ASYNCIO_READ]
    assert anyio.run(sizes, True) == [ASYNCIO_READ] * 3
