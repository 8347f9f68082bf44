"""One archive install: download all assets at once, verify, unpack into staging, smoke-check,
commit. The caller holds the build lock and registers the result."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from pathlib import Path

import anyio
import httpx

from .._version import __version__
from ..catalog.manifest import Manifest
from ..catalog.matching import AssetChoice
from ..errors import InstallFailed
from ..net import NetSettings
from ..sources.models import ReleaseAsset
from .download import Downloaded, discard, download
from .events import EventSink, ProgressEvent
from .extract import extract, find_executable
from .smoke import smoke_check
from .store import AssetRecord, BuildStore, Receipt, folder_size
from .verify import VerifiedBy, parse_checksums, verify

__all__ = ["ArchivePlan", "install_archive"]


@dataclass(frozen=True, slots=True)
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


def first_error(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The error to report from concurrent downloads: the first one, unwrapped."""
    first = group.exceptions[0]
    return first_error(first) if isinstance(first, BaseExceptionGroup) else first


def _emit(emit: EventSink | None, event: ProgressEvent) -> None:
    if emit is not None:
        emit(event)


async def _checksums(
    client: httpx.AsyncClient, net: NetSettings, plan: ArchivePlan, downloads: Path
) -> dict[str, str] | None:
    """The release's checksum file, fetched only when some asset lacks an API digest."""
    pattern = plan.manifest.checksums
    if not pattern or all(a.sha256 for a in plan.choice.assets):
        return None
    import re

    asset = next((a for a in plan.choice.release.assets if re.fullmatch(pattern, a.name)), None)
    if asset is None:
        return None
    got = await download(client, net, asset, downloads)
    text = got.path.read_text(encoding="utf-8", errors="replace")
    discard(got.path)
    return parse_checksums(text)


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
) -> Receipt:
    downloads = store.paths.downloads
    results: dict[str, Downloaded] = {}

    async def fetch(asset: ReleaseAsset) -> None:
        results[asset.name] = await download(
            client, net, asset, downloads, emit=emit, backoff=backoff
        )

    _emit(emit, ProgressEvent("downloading", plan.choice.primary.name, 0, plan.choice.primary.size))
    try:
        async with anyio.create_task_group() as tg:
            for asset in plan.choice.assets:
                tg.start_soon(fetch, asset)
    except BaseExceptionGroup as group:
        raise first_error(group) from None

    _emit(emit, ProgressEvent("verifying"))
    sums = await _checksums(client, net, plan, downloads)
    verified: dict[str, VerifiedBy] = {}
    for asset in plan.choice.assets:
        verified[asset.name] = verify(
            asset, results[asset.name], checksums=sums, require_checksum=require_checksum
        )

    _emit(emit, ProgressEvent("extracting", plan.choice.primary.name))
    staging = store.new_staging(plan.target)
    try:
        for asset in plan.choice.assets:
            await anyio.to_thread.run_sync(
                partial(
                    extract, results[asset.name].path, asset.name, staging, exe_name=plan.exe_name
                )
            )
        exe = find_executable(staging, plan.exe_name)
        if exe is None:
            raise InstallFailed(f"{plan.exe_name} not found in {plan.choice.primary.name}")
        exe.chmod(exe.stat().st_mode | 0o111)
        if smoke:
            await smoke_check(exe, plan.manifest.version_args)
        _emit(emit, ProgressEvent("committing"))
        receipt = Receipt(
            component=plan.manifest.id,
            version=plan.version,
            variant=plan.variant,
            source=f"github:{getattr(plan.manifest.source, 'repo', '')}",
            exe=exe.relative_to(staging).as_posix(),
            kind=plan.manifest.kind,
            name=plan.manifest.name,
            assets=[
                AssetRecord(
                    name=a.name,
                    url=a.url,
                    size=results[a.name].size,
                    sha256=results[a.name].sha256,
                    verified_by=verified[a.name],
                )
                for a in plan.choice.assets
            ],
            installed_at=datetime.now(UTC),
            size_bytes=folder_size(staging),
            backendmgr_version=__version__,
        )
        with anyio.CancelScope(shield=True):
            store.commit(staging, plan.target, receipt)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    for asset in plan.choice.assets:
        discard(results[asset.name].path)
    return receipt
