"""Where a build comes from: a GitHub release's archives or a package index's wheels. Each
source resolves what to install, says what a dry run would do, and builds it into the store;
:mod:`.install` runs the same steps around either."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Protocol

from ..api_models import AssetInfo, InstallResult
from ..errors import InstallFailed, InvalidInput, NotFound, UsageError
from ..events import EventSink
from ..immutable import frozen
from ..install.store import InstalledEntry
from ..units import format_size
from .context import Context
from .probe import GpuProbe
from .releases import Releases

if TYPE_CHECKING:
    from ..catalog.manifest import Manifest
    from ..install.archive_job import ArchivePlan
    from ..install.commit import Planned
    from ..install.venv_job import TorchIndex, VenvPlan
    from ..sources.github import GithubReleases

__all__ = ["BuildSource", "How", "Locked", "open_source"]


@frozen
class Locked:
    """What a lock file holds an install to (``sync``): each asset's SHA-256 by name, or
    every distribution of a venv by name."""

    sha256: Mapping[str, str] | None = None
    packages: Mapping[str, str] | None = None


class BuildSource(Protocol):
    """One resolved build, ready to be built into its plan's ``target``."""

    @property
    def plan(self) -> Planned: ...

    def dry_run(self, result: InstallResult) -> None:
        """Add what this source would fetch to a dry run's result."""

    async def build(self, emit: EventSink) -> None:
        """Build and commit it (the caller holds the build lock)."""

    def annotate(self, result: InstallResult, entry: InstalledEntry, already: bool) -> None:
        """Add what this kind of build tells about itself to the install's result."""


@frozen
class ArchiveSource:
    ctx: Context
    plan: ArchivePlan
    gh: GithubReleases
    how: How

    def dry_run(self, result: InstallResult) -> None:
        assets = self.plan.choice.assets
        result.message = "\n".join(
            [result.message]
            + [f"  {a.name}  {_shown_size(a.size)}  {a.url}  sha256:{a.sha256}" for a in assets]
        )
        result.release = self.plan.choice.release.tag
        result.assets = [
            AssetInfo(
                name=a.name,
                url=a.url,
                size=a.size,
                sha256=a.sha256,
                verified_by="digest" if a.sha256 else None,
            )
            for a in assets
        ]

    async def build(self, emit: EventSink) -> None:
        from ..install.archive_job import install_archive

        settings = await self.ctx.settings()
        await install_archive(
            self.plan,
            self.ctx.builds,
            self.gh.client,
            self.ctx.net,
            emit=emit,
            require_checksum=self.how.require_checksum or settings.require_checksum,
            smoke=self.how.smoke,
            backoff=self.ctx.retry_backoff,
            max_unpacked=int(settings.max_unpacked_gb * (1 << 30)),
            expected_sha256=self.how.locked.sha256,
        )

    def annotate(self, result: InstallResult, entry: InstalledEntry, already: bool) -> None:
        if any(a.verified_by == "none" for a in entry.receipt.assets) and not already:
            result.warn("no checksum was published for this build; recorded its SHA-256 only")


@frozen
class VenvSource:
    ctx: Context
    plan: VenvPlan
    how: How

    def dry_run(self, result: InstallResult) -> None:
        from ..install.venv_job import pip_options, plan_interpreter

        plan = self.plan
        installer = "uv" if plan.uv else "pip"
        found = plan_interpreter(plan, self.ctx.environ)
        python = f"Python {found.version} ({found.how})" if found else "a Python uv downloads"
        result.message += (
            f": a virtual environment with {plan.requirement} ({installer}, {python}; "
            f"Requires-Python {plan.requires_python or 'not declared'})"
        )
        result.installer = installer
        result.requirement = plan.requirement
        result.python = str(found.version) if found else None
        result.interpreter = found.path if found else None
        result.requires_python = plan.requires_python
        result.pip_args = [*pip_options(self.ctx.environ), *plan.index_args]
        if plan.cannot_run:
            result.warn(_cannot_run(plan.variant, plan.cannot_run))

    async def build(self, emit: EventSink) -> None:
        from ..install.venv_job import install_venv

        await install_venv(
            self.plan,
            self.ctx.builds,
            environ=self.ctx.environ,
            emit=emit,
            smoke=self.how.smoke,
            net=self.ctx.net,
        )

    def annotate(self, result: InstallResult, entry: InstalledEntry, already: bool) -> None:
        result.python = entry.receipt.python
        result.packages = entry.receipt.packages
        result.requires_python = self.plan.requires_python
        if self.plan.cannot_run and not already:
            result.warn(_cannot_run(entry.id, self.plan.cannot_run))


def _cannot_run(build: str, why: str) -> str:
    """The warning for a GPU build on a host without that GPU."""
    return (
        f"{build} needs a GPU this host lacks ({why}): it will not serve models here, and its "
        "--version was not run; install the cpu variant for this host, or set BACKENDMGR_GPU "
        "if detection is wrong"
    )


@frozen
class How:
    """How to build, whatever the source."""

    smoke: bool = True
    refresh: bool = False
    require_checksum: bool = False
    locked: Locked = Locked()


@contextlib.asynccontextmanager
async def open_source(
    ctx: Context,
    probe: GpuProbe,
    releases: Releases,
    manifest: Manifest,
    version: str | None,
    variant: str,
    os_name: str,
    plat: str,
    how: How,
) -> AsyncIterator[ArchiveSource | VenvSource]:
    """Resolve ``version`` (None: the newest with this variant) of ``manifest`` for
    ``plat``; an archive source keeps its HTTP client open while it lives."""
    from ..catalog.manifest import GithubSource

    if isinstance(manifest.source, GithubSource):
        from ..install.archive_job import ArchivePlan

        async with ctx.github() as gh:
            choice = await releases.choose(gh, manifest, variant, plat, version, how.refresh)
            target = ctx.builds.build_dir(manifest.id, choice.release.tag, variant)
            yield ArchiveSource(ctx, ArchivePlan(manifest, choice, os_name, target), gh, how)
        return
    plan = await _venv_plan(ctx, probe, releases, manifest, version, variant, plat, how.locked)
    yield VenvSource(ctx, plan, how)


async def _venv_plan(
    ctx: Context,
    probe: GpuProbe,
    releases: Releases,
    manifest: Manifest,
    version: str | None,
    variant: str,
    plat: str,
    locked: Locked,
) -> VenvPlan:
    """A Python-packaged backend: one virtual environment per version and variant."""
    from packaging.version import InvalidVersion, Version

    from ..catalog.matching import unknown_variant
    from ..install.venv_job import TORCH_INDEX_ENV, TORCH_INDEX_KEY, VenvPlan, find_uv

    chosen = manifest.variant(variant)
    if chosen is None:
        raise unknown_variant(manifest, variant)
    if not chosen.available_on(plat):
        raise NotFound(f"no {variant} build of {manifest.id} is published for {plat}")
    wanted: Version | None = None
    if version is not None:
        try:
            wanted = Version(version)
        except InvalidVersion as exc:
            raise InvalidInput(f'"{version}" is not a version number') from exc
    listed = await releases.index_releases(
        manifest, prereleases=manifest.allow_prerelease or bool(wanted and wanted.is_prerelease)
    )
    if wanted is None:
        if not listed:
            raise NotFound(f"no released versions of {manifest.id} were found")
        wanted = listed[0].version
    release = next((r for r in listed if r.version == wanted), None)
    if release is None:
        shown = ", ".join(str(r.version) for r in listed[:10]) or "none"
        raise NotFound(f"{manifest.id} {version} does not exist; available: {shown}")
    ver = str(wanted)
    target = ctx.builds.build_dir(manifest.id, ver, variant)
    pins = tuple(sorted((locked.packages or {}).items()))
    uv = find_uv(ctx.environ)
    settings = await ctx.settings()
    torch = None
    if chosen.torch_backend:
        torch = _torch_index(chosen.torch_backend, ctx.environ, settings.torch_index_url)
        if torch.url is None and uv is None:
            raise InstallFailed(
                f"the {variant} variant of {manifest.id} takes torch from the PyTorch index "
                f"through uv's --torch-backend; install uv, or set {TORCH_INDEX_ENV} (or the "
                f"config key {TORCH_INDEX_KEY}) to that index or a mirror of it"
            )
    return VenvPlan(
        manifest,
        ver,
        variant,
        target,
        uv,
        tuple(chosen.pip_args),
        pins,
        requires_python=release.requires_python,
        torch=torch,
        smoke_timeout=settings.venv_smoke_timeout,
        index_only=next(
            (v.id for v in manifest.variants_on(plat) if v.torch_backend is None), None
        ),
        cannot_run=probe.host.why_not(variant) if plat == probe.host.platform else None,
    )


def _torch_index(backend: str, environ: Mapping[str, str], configured: str | None) -> TorchIndex:
    """The variant's torch index: the environment's, else the config's, else uv's own."""
    from ..install.venv_job import TORCH_INDEX_ENV, TORCH_INDEX_KEY, TorchIndex

    from_env = environ.get(TORCH_INDEX_ENV, "").strip()
    if from_env:
        if not from_env.startswith(("http://", "https://", "file:")):
            raise UsageError(f"{TORCH_INDEX_ENV}={from_env} is not an http(s) URL")
        return TorchIndex(backend, from_env, TORCH_INDEX_ENV)
    if configured:
        return TorchIndex(backend, configured, f"the config key {TORCH_INDEX_KEY}")
    return TorchIndex(backend)


def _shown_size(size: int | None) -> str:
    return "size unknown" if size is None else format_size(size)
