"""The client reads a response's body up to 1 MiB at a time (issue 34): httpcore's own reads
are 64 KiB, asyncio's socket transport's 256 KiB, and each read costs a pass through httpcore,
h11, httpx, anyio and asyncio in Python."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import anyio

from backendmgr._wide_reads import READ_BYTES
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
