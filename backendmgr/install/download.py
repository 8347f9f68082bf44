"""Streaming download with the SHA-256 computed in-stream, resume and retries (SPEC §7.1).

The partial file lives in ``downloads/`` under a name derived from the URL and the expected
digest, so a later attempt (after Ctrl-C, a dropped connection or a crash) resumes it with
``Range`` + ``If-Range`` and hashes the bytes already on disk once.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import random
import stat
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import field
from pathlib import Path
from typing import IO

import anyio
import httpx

from .._fs import create_anew, read_regular, remove_name, sanitize_segment
from ..errors import NetworkError, VerificationError
from ..events import EventSink, ProgressEvent
from ..immutable import frozen
from ..net import NetSettings, describe_network_failure, open_following
from ..sources.models import ReleaseAsset
from ..units import format_size
from . import stages
from .formats import MAX_TOTAL

__all__ = ["DataSink", "Downloaded", "download", "part_path"]

RATE_AFTER_S = 0.5  # a download's speed is shown once it has run this long
CHUNK = 1 << 20
MAX_RETRIES = 5
# An attempt that added at least this much (or finished) was progress: the retry count restarts,
# so a long download over a link that drops every few hundred KB still completes.
PROGRESS_MIN = 64 << 10
RETRY_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
DataSink = Callable[[int, int], None]  # (offset in the file, bytes just written)


@frozen(slots=True)
class Downloaded:
    path: Path
    size: int
    sha256: str
    digests: dict[str, str] = field(default_factory=dict)  # every algorithm computed, by name


class _Retry(Exception):
    def __init__(self, reason: str, wait: float | None = None) -> None:
        super().__init__(reason)
        self.wait = wait


def part_path(downloads: Path, asset: ReleaseAsset) -> Path:
    key = hashlib.sha256(f"{asset.url}\n{asset.digest or ''}".encode()).hexdigest()[:16]
    return downloads / f"{key}-{sanitize_segment(asset.name)}.part"


def _meta_path(part: Path) -> Path:
    return part.with_name(part.name + ".json")


def _read_etag(part: Path) -> str | None:
    try:
        value = json.loads(read_regular(_meta_path(part), 4096, follow=False)).get("etag")
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, str) else None


def _write_etag(part: Path, etag: str | None) -> None:
    """The ETag beside the part file, made anew: whatever had its name (a link included) is
    removed, never written through."""
    meta = _meta_path(part)
    if etag:
        create_anew(meta, json.dumps({"etag": etag}).encode())
    else:
        remove_name(meta)


def discard(part: Path) -> None:
    """A part file and its note, whatever has their names in the downloads folder (ours): a
    folder there would otherwise stop every install of that asset, and ``cache clean``."""
    remove_name(part)
    remove_name(_meta_path(part))


_NOT_FOLLOWED = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)


def _only_a_file(part: Path) -> None:
    """A part file is a regular file of ours or nothing: a link there (planted, or left by a
    tool) would have the download hash and extend its target, a hard link would extend its
    other name's file too, a FIFO would hang the install, a folder would stop it. Each is
    removed, never followed or written, and the download starts over."""
    try:
        st = part.lstat()
    except FileNotFoundError:
        return
    if stat.S_ISREG(st.st_mode) and st.st_nlink == 1:
        return
    discard(part)  # a hard link's other names (a backup made with cp -al) keep their bytes


def open_part(part: Path, mode: str) -> IO[bytes]:
    """``part`` opened unbuffered for ``rb``, ``ab`` or ``wb`` without following a link or
    waiting on a FIFO (an OSError for either, and for anything but a regular file)."""
    flags = {
        "rb": os.O_RDONLY,
        "ab": os.O_WRONLY | os.O_CREAT | os.O_APPEND,
        "wb": os.O_WRONLY | os.O_CREAT | os.O_EXCL,  # a file of its own: never truncates one
    }[mode]
    if mode == "wb":
        remove_name(part)
    fd = os.open(part, flags | _NOT_FOLLOWED | getattr(os, "O_CLOEXEC", 0), 0o666)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or (mode != "rb" and st.st_nlink > 1):
            raise OSError(errno.EINVAL, "not a regular file of its own", str(part))
        if mode != "rb":
            os.set_blocking(fd, True)
        return os.fdopen(fd, mode, buffering=0)
    except BaseException:
        os.close(fd)
        raise


class _Hashes:
    """SHA-256 plus whatever else the release publishes, fed once from the same stream."""

    def __init__(self, algorithms: Iterable[str] = ()) -> None:
        names = {"sha256", *algorithms}
        self._all = {name: hashlib.new(name, usedforsecurity=False) for name in names}

    def update(self, data: bytes) -> None:
        for h in self._all.values():
            h.update(data)

    def hexdigest(self) -> str:
        return self._all["sha256"].hexdigest()

    def done(self, part: Path, size: int) -> Downloaded:
        digests = {name: h.hexdigest() for name, h in self._all.items()}
        return Downloaded(part, size, digests["sha256"], digests)


def _hash_existing(part: Path, algorithms: Iterable[str] = ()) -> tuple[int, _Hashes]:
    digest = _Hashes(algorithms)
    size = 0
    try:
        with open_part(part, "rb") as fh:
            while chunk := fh.read(CHUNK):
                digest.update(chunk)
                size += len(chunk)
    except FileNotFoundError:
        pass
    return size, digest


def _count(text: str) -> int | None:
    """A byte count from a header: ASCII digits only, bounded (a server's text is not trusted)."""
    text = text.strip()
    return int(text) if text.isascii() and text.isdigit() and len(text) <= 18 else None


def _served_size(response: httpx.Response) -> int | None:
    """The whole file's size as the server states it (Content-Length or Content-Range)."""
    if response.status_code == 206:
        return _count(response.headers.get("content-range", "").rpartition("/")[2])
    return _count(response.headers.get("content-length", ""))


def _retry_after(response: httpx.Response) -> float | None:
    value = _count(response.headers.get("retry-after", ""))
    return min(float(value), 60.0) if value is not None else None


@frozen(slots=True)
class _Transfer:
    """One asset into its ``.part`` file: what every attempt at it needs."""

    client: httpx.AsyncClient
    net: NetSettings
    asset: ReleaseAsset
    part: Path
    emit: EventSink | None
    algorithms: tuple[str, ...]
    on_data: DataSink | None
    max_bytes: int  # the bound where neither the release nor the server states a size

    async def attempt(self) -> Downloaded:
        with stages.timed("download"):
            return await self._attempt()

    async def _attempt(self) -> Downloaded:
        _only_a_file(self.part)
        have, digest = _hash_existing(self.part, self.algorithms)
        total = self.asset.size
        if total is not None and have == total and have > 0:
            return digest.done(self.part, have)
        if total is not None and have > total:
            discard(self.part)
            have, digest = 0, _Hashes(self.algorithms)
        headers = {"Accept": "application/octet-stream"}
        etag = _read_etag(self.part) if have else None
        if have:
            headers["Range"] = f"bytes={have}-"
            if etag:
                headers["If-Range"] = etag
        try:
            response, final_url = await open_following(
                self.client,
                self.net,
                self.asset.url,
                headers,
                check=self.net.check_download_url,
                token=False,
                hops=10,
            )
        except httpx.TransportError as exc:
            raise _Retry(describe_network_failure(exc, self.asset.url, self.net)) from exc
        except (httpx.HTTPError, httpx.StreamError) as exc:
            raise NetworkError(describe_network_failure(exc, self.asset.url, self.net)) from exc
        try:
            status = response.status_code
            if status in RETRY_STATUSES:
                raise _Retry(f"HTTP {status}", _retry_after(response))
            if status == 416 and have:
                discard(self.part)
                raise _Retry("HTTP 416 for a resumed range; starting over", 0)
            if status not in (200, 206):
                raise NetworkError(f"HTTP {status} for {final_url}; the download failed")
            mode = "ab"
            if status == 206 and have:
                start = response.headers.get("content-range", "").split(" ")[-1].split("-")[0]
                if start != str(have):
                    mode, have, digest = "wb", 0, _Hashes(self.algorithms)
                elif self.emit is not None:
                    of = f" of {format_size(total)}" if total is not None else ""
                    message = f"resuming {self.asset.name} at {format_size(have)}{of}"
                    self.emit(
                        ProgressEvent("downloading", self.asset.name, have, total, 0.0, message)
                    )
            else:
                mode, have, digest = "wb", 0, _Hashes(self.algorithms)
            served = _served_size(response)
            if total is not None and served is not None and served != total:
                discard(self.part)
                raise VerificationError(
                    f"{self.asset.name} is {served} bytes on the server but the release says "
                    f"{total}; nothing was installed"
                )
            _write_etag(self.part, response.headers.get("etag"))
            if total is None:
                total = served
            # a body may have no length and no end: never more than the stated size
            limit = total if total is not None else self.max_bytes
            over = False
            started, done_at_start = time.monotonic(), have
            last_emit = 0.0
            from .._wide_reads import raw_reads  # loaded with the client's transport

            # unbuffered: every piece is in the file when on_data hears of it; the body is
            # read raw, nothing decodes it, so the connection reads it 1 MiB at a time
            with open_part(self.part, mode) as fh, raw_reads(response):
                try:
                    # no re-chunking: every piece is written as it arrives, so a cut loses nothing
                    async for chunk in response.aiter_raw():
                        if have + len(chunk) > limit:
                            over = True
                            break
                        _write_all(fh, chunk)
                        hashed = time.perf_counter()
                        digest.update(chunk)
                        stages.add("hash", time.perf_counter() - hashed)
                        if self.on_data is not None:
                            self.on_data(have, len(chunk))
                        have += len(chunk)
                        now = time.monotonic()
                        if self.emit is not None and now - last_emit >= 0.1:
                            last_emit = now
                            # the first pieces come from buffers at once: no rate from them
                            elapsed = now - started
                            done = have - done_at_start
                            rate = done / elapsed if elapsed >= RATE_AFTER_S else 0.0
                            self.emit(
                                ProgressEvent("downloading", self.asset.name, have, total, rate)
                            )
                except (httpx.TransportError, httpx.StreamError) as exc:
                    reason = describe_network_failure(exc, final_url, self.net)
                    raise _Retry(f"connection lost after {have} bytes: {reason}") from exc
            if over:
                discard(self.part)  # more than the whole file: no resume can make it right
                raise VerificationError(self._overrun(limit, total is not None))
            if total is not None and have < total:
                raise _Retry(f"connection closed after {have} of {total} bytes")
            if self.emit is not None:
                rate = (have - done_at_start) / max(time.monotonic() - started, 1e-6)
                self.emit(ProgressEvent("downloading", self.asset.name, have, total, rate))
            return digest.done(self.part, have)
        finally:
            await response.aclose()

    def _overrun(self, limit: int, stated: bool) -> str:
        if not stated:
            whose = "allowed for a file of no stated size (max_unpacked_gb)"
        elif self.asset.size is not None:
            whose = "listed for it"
        else:
            whose = "the server stated"
        return (
            f"{self.asset.name}: the server sent more than the {limit} bytes {whose}; "
            "the partial download was discarded"
        )


async def download(
    client: httpx.AsyncClient,
    net: NetSettings,
    asset: ReleaseAsset,
    downloads: Path,
    *,
    emit: EventSink | None = None,
    retries: int = MAX_RETRIES,
    backoff: float = 0.5,
    sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
    algorithms: Iterable[str] = (),
    on_data: DataSink | None = None,
    max_bytes: int = MAX_TOTAL,
) -> Downloaded:
    """Fetch ``asset`` into its ``.part`` file; retried transient failures resume each time.

    ``algorithms`` are hashed in the same pass as SHA-256 (a release may publish SHA-512).
    ``on_data(offset, n)`` hears of every piece once it is in the file (a reader may follow).
    A body longer than the release's size (else the server's) is refused and its part file
    discarded; with no size stated anywhere, ``max_bytes`` bounds it."""
    net.require_online(f"downloading {asset.name}")
    downloads.mkdir(parents=True, exist_ok=True)
    part = part_path(downloads, asset)
    transfer = _Transfer(client, net, asset, part, emit, tuple(algorithms), on_data, max_bytes)
    attempt = 0  # attempts in a row that made no progress
    while True:
        before = size_on_disk(part)
        try:
            return await transfer.attempt()
        except _Retry as exc:
            if size_on_disk(part) - before >= PROGRESS_MIN:
                attempt = 0  # the link works, it only drops: resume at once
                if exc.wait is None:
                    continue
            attempt += 1
            if attempt > retries:
                raise NetworkError(
                    f"downloading {asset.name} failed after {retries} retries without "
                    f"progress ({exc}); run the same command again to resume"
                ) from exc
            wait = exc.wait if exc.wait is not None else backoff * 2 ** (attempt - 1)
            await sleep(wait * (1 + random.random() * 0.25))


def _write_all(fh: IO[bytes], data: bytes) -> None:
    """A raw write may take part of the buffer; write the rest."""
    view = memoryview(data)
    while view:
        n = fh.write(view)
        if not n:
            raise OSError(errno.EIO, "the download could not be written")
        view = view[n:]


def size_on_disk(part: Path) -> int:
    """The bytes a part file holds; nothing for anything but a regular file."""
    try:
        st = part.lstat()
    except FileNotFoundError:
        return 0
    return st.st_size if stat.S_ISREG(st.st_mode) else 0
