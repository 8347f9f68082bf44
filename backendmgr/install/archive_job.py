"""One archive install: download all assets at once, verify, unpack into staging, smoke-check,
commit. The caller holds the build lock and registers the result."""

from __future__ import annotations

import contextlib
import shutil
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from functools import partial
from pathlib import Path
from typing import IO, TYPE_CHECKING, TypeAlias

import anyio
import httpx
from filelock import Timeout

from ..catalog.manifest import Manifest
from ..catalog.matching import AssetChoice, checksum_assets
from ..errors import InstallFailed, NetworkError, UnsafeArchive, first_error
from ..events import EventSink, ProgressEvent
from ..immutable import frozen
from ..net import NetSettings
from ..sources.models import ReleaseAsset
from . import stages
from .builds import BuildStore
from .download import (
    DataSink,
    Downloaded,
    discard,
    download,
    open_part,
    part_path,
    size_on_disk,
)
from .formats import MAX_TOTAL, archive_format, streamable
from .locked import check_locked_assets, verify_locked
from .store import AssetRecord, Receipt
from .verify import Published, VerifiedBy, algorithms_for, parse_checksums, verify

# The unpacking machinery (extract.py, zipstream.py: tarfile, zipfile, ISA-L, the writing
# threads) and the smoke check load only once the download has started, in the unpacking
# thread and after the download: none of it is needed before, when nothing else could run.
if TYPE_CHECKING:
    from .extract import ExtractReport
    from .zipstream import StreamedZip

__all__ = ["ArchivePlan", "install_archive"]

MAX_CHECKSUM_FILE = 1 << 20


@frozen(slots=True)
class ArchivePlan:
    manifest: Manifest
    choice: AssetChoice
    os_name: str
    target: Path

    @property
    def version(self) -> str:
        return self.choice.release.tag

    @property
    def variant(self) -> str:
        return self.choice.variant

    @property
    def exe_name(self) -> str:
        return self.manifest.exe_for(self.os_name)


def _emit(emit: EventSink | None, event: ProgressEvent) -> None:
    if emit is not None:
        emit(event)


async def _published(
    client: httpx.AsyncClient, net: NetSettings, plan: ArchivePlan, downloads: Path
) -> dict[str, list[Published]]:
    """What every checksum file of the release says about each chosen asset.

    Any published file counts (``SHA256SUMS``, ``checksums.txt``, ``<asset>.sha512`` or the
    manifest's pattern), even when the API gives digests: a contradiction must refuse."""
    out: dict[str, list[Published]] = {a.name: [] for a in plan.choice.assets}
    for sums, owner in checksum_assets(plan.manifest, plan.choice.release, plan.choice.assets):
        if sums.size is None or sums.size > MAX_CHECKSUM_FILE:
            continue  # unbounded: never read a "checksum file" that could be anything
        got = await download(client, net, sums, downloads)
        try:
            verify(sums, got)
            with got.path.open("rb") as fh:
                text = fh.read(MAX_CHECKSUM_FILE).decode("utf-8", "replace")
        finally:
            discard(got.path)
        for name, entries in parse_checksums(text, implied=owner, file_name=sums.name).items():
            base = name.rsplit("/", 1)[-1]
            if base in out and owner in (None, base):
                out[base] += [Published(a, h, "checksums", sums.name) for a, h in entries]
    return out


@contextlib.asynccontextmanager
async def _holding(store: BuildStore, parts: list[Path]) -> AsyncIterator[None]:
    """Hold each part file's lock, so that ``doctor --fix`` leaves a live download alone."""
    locks = [store.part_lock(p) for p in parts]
    held = []
    try:
        for lock in locks:
            while True:
                try:
                    lock.acquire(timeout=0)
                    break
                except Timeout:
                    await anyio.sleep(0.05)
            held.append(lock)
        yield
    finally:
        for lock in held:
            lock.release()


class _Aborted(Exception):
    """The download behind a streamed unpack failed or started over."""


class _Follower:
    """A file object over a ``.part`` file that is still being written: reads wait for the
    downloader's next piece. Started over (a server that ignored ``Range``) or failed, it
    raises, and the streamed unpack is thrown away."""

    def __init__(self, part: Path, have: int) -> None:
        self._part = part
        self._fh: IO[bytes] | None = None
        self._cond = threading.Condition()
        self._available = have  # bytes on disk the downloader vouches for, in order
        self._pos = 0
        self._done = False
        self.broken = False

    def on_data(self, offset: int, n: int) -> None:
        """From the downloader, on the event loop: ``n`` bytes at ``offset`` are written."""
        with self._cond:
            if offset != self._available:
                self.broken = True
            self._available = offset + n
            self._cond.notify()

    def finish(self, ok: bool) -> None:
        with self._cond:
            self._done = True
            self.broken = self.broken or not ok
            self._cond.notify()

    def read(self, n: int = -1) -> bytes:
        """``n`` bytes (fewer only at the end), as a buffered file would give them: tarfile
        sniffs the compression from its first read."""
        if n < 0:
            n = 1 << 62
        pieces: list[bytes] = []
        got = 0
        while got < n and (piece := self._read_some(n - got)):
            pieces.append(piece)
            got += len(piece)
        return b"".join(pieces)

    def _read_some(self, n: int) -> bytes:
        while True:
            with self._cond:
                if not (self.broken or self._done or self._available > self._pos):
                    with stages.timed("unpack_wait"):
                        while not (self.broken or self._done or self._available > self._pos):
                            self._cond.wait()
                if self.broken:
                    raise _Aborted("the download started over")
                want = self._available - self._pos
                if want <= 0:
                    return b""  # done, and everything read
            if self._fh is None:
                self._fh = open_part(self._part, "rb")
            self._fh.seek(self._pos)
            data = self._fh.read(min(n, want))
            if data:
                self._pos += len(data)
                return data
            with self._cond:  # truncated under us: only a restart does that
                self.broken = True

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()


def _discard_all(parts: list[Path]) -> None:
    for part in parts:
        discard(part)


_Streamed: TypeAlias = "ExtractReport | UnsafeArchive | StreamedZip | None"


async def _download_streaming(
    fetch: Callable[[ReleaseAsset, DataSink | None], Awaitable[None]],
    asset: ReleaseAsset,
    staging: Path,
    downloads: Path,
    max_unpacked: int,
    exe_name: str,
) -> _Streamed:
    """Download ``asset`` and unpack it into ``staging`` at the same time, in a thread that
    follows the part file. The unpack's report, its refusal (the same bytes, once verified,
    would say the same), a zip waiting for its central directory, or None when it must be
    redone from the finished file (it failed otherwise, or the download started over)."""
    part = part_path(downloads, asset)
    follower = _Follower(part, size_on_disk(part))
    outcome: list[_Streamed] = [None]
    ended = [0.0, 0.0]  # when the download, and the unpack, ended

    def unpack() -> None:
        cpu = time.thread_time()  # against "unpack": the rest waited for the GIL or a core
        try:
            unpack_as: Callable[..., _Streamed]
            if archive_format(asset.name) == "zip":  # loaded only to install a zip
                from .zipstream import stream_zip as unpack_as
            else:
                from .extract import extract_stream as unpack_as
            from .inflate import keep_pieces_in_heap

            keep_pieces_in_heap()
            assert asset.size is not None
            with stages.timed("unpack"):
                outcome[0] = unpack_as(
                    follower, asset.name, staging, compressed=asset.size, max_total=max_unpacked
                )
        except UnsafeArchive as exc:
            outcome[0] = exc
        except Exception:  # redone after verification, where it is reported (or not needed)
            outcome[0] = None
        finally:
            follower.close()
            ended[1] = time.perf_counter()
            stages.add("unpack_cpu", time.thread_time() - cpu)

    async def download_then_finish() -> None:
        ok = False
        try:
            await fetch(asset, follower.on_data)
            ok = True
        finally:
            ended[0] = time.perf_counter()
            follower.finish(ok)

    async with anyio.create_task_group() as tg:
        tg.start_soon(download_then_finish)
        tg.start_soon(partial(anyio.to_thread.run_sync, unpack))
    stages.add("unpack_after_download", max(ended[1] - ended[0], 0.0))
    return None if follower.broken else outcome[0]


async def install_archive(
    plan: ArchivePlan,
    store: BuildStore,
    client: httpx.AsyncClient,
    net: NetSettings,
    *,
    emit: EventSink | None = None,
    require_checksum: bool = False,
    smoke: bool = True,
    backoff: float = 0.5,
    max_unpacked: int = MAX_TOTAL,
    expected_sha256: Mapping[str, str] | None = None,
) -> Receipt:
    """Download, verify, unpack, smoke-check and commit one build.

    ``expected_sha256`` (asset name → hex, from a lock file) must name exactly the chosen
    assets, agree with every server digest, and match the downloaded bytes.

    A refused or failed install leaves no part file behind; only a download that the network
    cut (or a cancel) keeps its part files, so that the next attempt resumes them."""
    began = time.perf_counter()
    stages.reset()
    downloads = store.paths.downloads
    sums = checksum_assets(plan.manifest, plan.choice.release, plan.choice.assets)
    parts = [part_path(downloads, a) for a in (*plan.choice.assets, *(s for s, _ in sums))]
    async with _holding(store, parts):
        if expected_sha256 is not None:
            check_locked_assets(plan.choice.assets, expected_sha256)
        results: dict[str, Downloaded] = {}
        published = await _published(client, net, plan, downloads)

        async def fetch(asset: ReleaseAsset, on_data: DataSink | None = None) -> None:
            results[asset.name] = await download(
                client,
                net,
                asset,
                downloads,
                emit=emit,
                backoff=backoff,
                algorithms=algorithms_for(asset, published[asset.name]),
                on_data=on_data,
                max_bytes=max_unpacked,
            )

        _emit(
            emit,
            ProgressEvent("downloading", plan.choice.primary.name, 0, plan.choice.primary.size),
        )
        staging: Path | None = None
        streamed: _Streamed = None
        primary = plan.choice.primary
        try:
            if (
                len(plan.choice.assets) == 1
                and primary.size is not None
                and streamable(primary.name)
            ):
                # Unpack while downloading into a staging folder that is committed only after
                # verification, and discarded if anything about the download goes wrong.
                staging = store.new_staging(plan.target)
                streamed = await _download_streaming(
                    fetch, primary, staging, downloads, max_unpacked, plan.exe_name
                )
            else:
                async with anyio.create_task_group() as tg:
                    for asset in plan.choice.assets:
                        tg.start_soon(fetch, asset)
        except BaseExceptionGroup as group:
            if staging is not None:
                shutil.rmtree(staging, ignore_errors=True)
            first = first_error(group)
            if isinstance(first, Exception) and not isinstance(first, NetworkError):
                _discard_all(parts)  # refused bytes or a full disk: keep nothing (a cut resumes)
            raise first from None
        except BaseException:
            if staging is not None:
                shutil.rmtree(staging, ignore_errors=True)
            raise

        try:
            from .commit import check_staged, commit_staged
            from .extract import ExtractReport, extract, find_executable
            from .inflate import keep_pieces_in_heap

            _emit(emit, ProgressEvent("verifying"))
            verified: dict[str, VerifiedBy] = {}
            for asset in plan.choice.assets:
                verified[asset.name] = verify(
                    asset,
                    results[asset.name],
                    published=published[asset.name],
                    require_checksum=require_checksum,
                )
                if expected_sha256 is not None:
                    verify_locked(asset, results[asset.name], expected_sha256[asset.name])
            _emit(emit, ProgressEvent("extracting", plan.choice.primary.name))
            if isinstance(streamed, UnsafeArchive):
                raise streamed  # from the bytes just verified: unpacking them again says it again
            if streamed is not None and not isinstance(streamed, ExtractReport):
                # a zip's streamed tree: kept if its central directory agrees
                with stages.timed("zip_finish"):
                    streamed = await anyio.to_thread.run_sync(
                        streamed.finish, results[primary.name].path
                    )
            if streamed is None and staging is not None:
                # the streamed unpack failed: redo it from the verified file, for its own error
                shutil.rmtree(staging, ignore_errors=True)
                staging = None
            if staging is None:
                staging = store.new_staging(plan.target)
            used = streamed.bytes if streamed is not None else 0
            if streamed is None:
                keep_pieces_in_heap()
            for asset in plan.choice.assets if streamed is None else ():
                started = time.perf_counter()
                report = await anyio.to_thread.run_sync(
                    partial(
                        extract,
                        results[asset.name].path,
                        asset.name,
                        staging,
                        exe_name=plan.exe_name,
                        max_total=max_unpacked - used,
                    )
                )
                used += report.bytes
                stages.add("extract", time.perf_counter() - started)
            exe = find_executable(staging, plan.exe_name)
            if exe is None:
                raise InstallFailed(f"{plan.exe_name} not found in {plan.choice.primary.name}")
            exe.chmod(exe.stat().st_mode | 0o111)
            started = time.perf_counter()
            capabilities = await check_staged(exe, plan.manifest, smoke=smoke)
            stages.add("smoke", time.perf_counter() - started)
            _emit(emit, ProgressEvent("committing"))
            records = [
                AssetRecord(
                    name=a.name,
                    url=a.url,
                    size=results[a.name].size,
                    sha256=results[a.name].sha256,
                    verified_by=verified[a.name],
                )
                for a in plan.choice.assets
            ]
            # The archive is unpacked and checked: it goes before the commit's file-system
            # sync, which would otherwise write its pages to the disk only for them to be
            # freed (as many bytes again as the build's, on every install).
            with stages.timed("commit"):
                _discard_all(parts)
                receipt = await commit_staged(
                    store, plan, staging, exe, capabilities, assets=records
                )
        except BaseException as exc:
            if staging is not None:
                shutil.rmtree(staging, ignore_errors=True)
            if isinstance(exc, Exception) and not isinstance(exc, anyio.get_cancelled_exc_class()):
                _discard_all(parts)  # refused or failed: the verified archive goes too
            raise
        stages.add("install", time.perf_counter() - began)
        stages.save()
        return receipt
