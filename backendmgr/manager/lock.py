"""``lock`` and ``fetch``: ``lock`` records the installed builds (receipts) and the activated
one per component; ``fetch`` lays out every locked asset as :mod:`backendmgr.mirror` serves
it, for sites without a network. ``sync`` (:mod:`.sync`) installs from a lock."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from pathlib import Path
from typing import Any

import anyio

from .._fs import atomic_write_bytes
from ..api_models import FetchResult, LockResult
from ..errors import ConfigError, NetworkError
from ..immutable import frozen
from ..lockfile import (
    LOCK_NAME,
    GithubLock,
    LockedAsset,
    LockFile,
    PypiLock,
    lock_from_entries,
    locked_entry,
    read_lock,
    write_lock,
)
from .context import Context
from .facts import activated_id

__all__ = ["Locks", "plural"]

FETCH_CONCURRENCY = 4
PARTIAL = ".partial"  # beside the assets of a release: its downloads in progress


def plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


@frozen
class Locks:
    ctx: Context

    def lock_path(self, path: str | os.PathLike[str] | None = None) -> Path:
        """The lock named, else ``backendmgr.lock`` beside the config file."""
        if path is not None:
            return Path(path).expanduser().absolute()
        return self.ctx.paths.config_dir / LOCK_NAME

    async def current_lock(self) -> LockFile:
        """This machine's builds as a lock: every receipt, and the activated build of each."""
        from ..catalog.manifest import PypiSource

        ctx = self.ctx
        settings = await ctx.settings()
        entries = await anyio.to_thread.run_sync(ctx.builds.installed)
        builds = []
        for entry in entries:
            pypi: PypiLock | None = None
            manifest = ctx.catalog.get(entry.receipt.component)
            if manifest is not None and isinstance(manifest.source, PypiSource):
                variant = manifest.variant(entry.receipt.variant)
                pypi = PypiLock(
                    type="pypi",
                    package=manifest.source.package,
                    index_url=manifest.source.index_url,
                    pip_args=list(variant.pip_args) if variant else [],
                )
            builds.append(locked_entry(entry, pypi))
        ids = {e.id for e in entries}
        activated = {}
        for component in sorted({e.receipt.component for e in entries}):
            active = activated_id(settings, component)
            if active in ids:
                activated[component] = active
        return lock_from_entries(builds, activated)

    # --- lock -----------------------------------------------------------------------------

    async def lock(
        self, output: str | os.PathLike[str] | None = None, *, fetch: str | None = None
    ) -> LockResult:
        """Write the lock of this machine's builds; with ``fetch``, download its assets too."""
        path = self.lock_path(output)
        lock = await self.current_lock()
        fetched = None
        if fetch is not None:  # first: a failed fetch leaves the old lock as it was
            fetched = await self._fetch_lock(lock, Path(fetch).expanduser().absolute())
        changed = await anyio.to_thread.run_sync(write_lock, path, lock)
        ids = [b.id for b in lock.builds]
        head = (
            f"wrote {path} ({plural(len(ids), 'build')})"
            if changed
            else f"{path} is up to date ({plural(len(ids), 'build')})"
        )
        result = LockResult(
            message=head,
            changed=changed,
            warnings=[] if ids else ["no builds are installed; the lock lists none"],
            path=str(path),
            builds=ids,
            activated=dict(lock.activated),
        )
        if fetched is not None:
            result.fetch = fetched
            result.message += f"; {fetched.message}"
        return result

    # --- fetch ----------------------------------------------------------------------------

    async def fetch(
        self, dest: str | os.PathLike[str], lock: str | os.PathLike[str] | None = None
    ) -> FetchResult:
        """Download every archive asset of a lock into ``dest``, laid out for the mirror."""
        path = self.lock_path(lock)
        parsed = await anyio.to_thread.run_sync(read_lock, path)
        return await self._fetch_lock(parsed, Path(dest).expanduser().absolute())

    async def _fetch_lock(self, lock: LockFile, dest: Path) -> FetchResult:
        from ..install.download import discard, download, part_path
        from ..install.locked import verify_locked
        from ..install.verify import verify
        from ..sources.models import ReleaseAsset

        def where(source: GithubLock, asset: LockedAsset) -> Path:
            owner, repo = source.repo.split("/")
            return dest / owner / repo / source.tag / asset.name

        # One job per file: two builds may name the same asset (a shared companion archive),
        # and two jobs on one file would write one partial file at once.
        jobs: dict[Path, tuple[GithubLock, LockedAsset]] = {}
        for build in lock.builds:
            if not isinstance(build.source, GithubLock):
                continue
            for asset in build.assets:
                final = where(build.source, asset)
                seen = jobs.setdefault(final, (build.source, asset))[1]
                if (seen.url, seen.sha256, seen.size) != (asset.url, asset.sha256, asset.size):
                    raise ConfigError(
                        f"the lock names {build.source.repo}/{build.source.tag}/{asset.name} "
                        "twice with different contents; nothing was fetched"
                    )
        wanted = list(jobs.values())
        fetched: list[str] = []
        present: list[str] = []
        limiter = anyio.CapacityLimiter(FETCH_CONCURRENCY)

        def already(final: Path, asset: LockedAsset) -> bool:
            return (
                final.is_file()
                and final.stat().st_size == asset.size
                and _file_sha256(final) == asset.sha256
            )

        async def one(source: GithubLock, locked: LockedAsset, client: Any) -> None:
            final = where(source, locked)
            label = f"{source.repo}/{source.tag}/{locked.name}"
            async with limiter:
                if await anyio.to_thread.run_sync(already, final, locked):
                    present.append(label)
                    return
                asset = ReleaseAsset(
                    name=locked.name,
                    url=locked.url,
                    size=locked.size,
                    digest=f"sha256:{locked.sha256}",
                )
                # The release's assets share this folder; each job touches only its own file
                # in it, and the folder goes when every job is done (if nothing is left).
                partial = final.parent / PARTIAL
                try:
                    got = await download(
                        client, self.ctx.net, asset, partial, backoff=self.ctx.retry_backoff
                    )
                    verify(asset, got)
                    verify_locked(asset, got, locked.sha256)
                    os.replace(got.path, final)
                    discard(got.path)  # its resume note
                except Exception as exc:  # refused: keep nothing; a cut network resumes
                    if not isinstance(exc, NetworkError):
                        discard(part_path(partial, asset))
                    raise
                with_meta = final.parent / ".release.json"
                if not with_meta.exists():
                    meta = {"name": source.tag, "prerelease": False}
                    atomic_write_bytes(with_meta, json.dumps(meta).encode())
                fetched.append(label)

        if wanted:
            dest.mkdir(parents=True, exist_ok=True)
            try:
                async with self.ctx.github() as gh:
                    try:
                        async with anyio.create_task_group() as tg:
                            for source, asset in wanted:
                                tg.start_soon(one, source, asset, gh.client)
                    except BaseExceptionGroup as group:
                        from ..errors import first_error

                        raise first_error(group) from None
            finally:
                for folder in sorted({final.parent / PARTIAL for final in jobs}):
                    with contextlib.suppress(OSError):  # kept while a partial file resumes
                        folder.rmdir()
        message = (
            f"fetched {plural(len(fetched), 'asset')} into {dest}"
            + (f" ({len(present)} already there)" if present else "")
            + (
                f'; serve it with "scripts/mirror.py {dest}" and sync with '
                "BACKENDMGR_GITHUB_API set to its address"
                if wanted
                else ""
            )
        )
        if not wanted:
            message = "the lock lists no archive builds; nothing to fetch"
        return FetchResult(
            message=message,
            changed=bool(fetched),
            dir=str(dest),
            fetched=sorted(fetched),
            present=sorted(present),
        )
