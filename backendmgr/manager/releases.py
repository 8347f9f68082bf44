"""What can be installed: ``catalog`` and ``releases``, and the choice of a release's assets
(GitHub) or a package's version (package index) that an install starts from."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from ..config.models import Settings
from ..errors import NotFound
from ..immutable import frozen
from .context import Context
from .facts import activated_id
from .probe import GpuProbe

if TYPE_CHECKING:  # the catalog's results and query: an install makes none
    from packaging.version import Version

    from ..api_models import CatalogEntry, ReleaseInfo
    from ..catalog.host import Host
    from ..catalog.manifest import Manifest
    from ..catalog.matching import AssetChoice
    from ..install.builds import BuildStore
    from ..requests import ReleasesQuery
    from ..sources.github import GithubReleases
    from ..sources.models import Release
    from ..sources.pypi import IndexRelease

__all__ = ["Releases"]


@frozen
class Releases:
    ctx: Context
    probe: GpuProbe

    async def catalog(self) -> list[CatalogEntry]:
        from ..api_models import CatalogEntry, VariantHere
        from ..catalog.manifest import source_label
        from ..catalog.matching import suggest_variant

        ctx, host = self.ctx, self.probe.host
        settings = await ctx.settings()
        installed = ctx.builds.installed()
        return [
            CatalogEntry(
                id=m.id,
                name=m.name,
                kind=m.kind,
                source=source_label(m.source),
                variants=[
                    VariantHere(
                        id=v.id,
                        available=v.available_on(host.platform),
                        runs_here=host.why_not(v.id) is None,
                        why_not=host.why_not(v.id),
                    )
                    for v in m.variants
                ],
                suggested=(suggested := suggest_variant(m, host))[0],
                why=suggested[1],
                installed=[e.id for e in installed if e.receipt.component == m.id],
                activated=activated_id(settings, m.id),
            )
            for m in ctx.catalog
        ]

    async def recent(self, query: ReleasesQuery) -> list[ReleaseInfo]:
        from ..catalog.manifest import GithubSource
        from ..catalog.matching import unknown_variant, variants_in_release

        manifest = self.ctx.manifest(query.component)
        os_name, arch = self.probe.platform(query.platform)
        plat = f"{os_name}-{arch}"
        variant = query.variant
        if variant is not None and manifest.variant(variant) is None:
            raise unknown_variant(manifest, variant)
        marks = _Marks(await self.ctx.settings(), self.ctx.builds, self.probe.host, query.component)
        source = manifest.source
        if not isinstance(source, GithubSource):
            indexed = await self.index_releases(manifest, prereleases=manifest.allow_prerelease)
            here = [v.id for v in manifest.variants_on(plat)]
            if variant is not None and variant not in here:
                return []
            return [
                marks.info(
                    str(r.version),
                    r.uploaded.isoformat() if r.uploaded else None,
                    r.version.is_prerelease,
                    here,
                )
                for r in indexed[: query.limit]
            ]
        async with self.ctx.github() as gh:
            listed = await gh.releases(source.repo, refresh=query.refresh)
            if not query.refresh and not self.ctx.net.offline and self._behind(listed, manifest):
                listed = await gh.releases(source.repo, refresh=True)  # a stale cached list
        out: list[ReleaseInfo] = []
        for rel in listed:
            ships = variants_in_release(manifest, rel, plat)
            if variant is not None and variant not in ships:
                continue
            when = rel.published_at.isoformat() if rel.published_at else None
            out.append(marks.info(rel.tag, when, rel.prerelease, ships))
            if len(out) >= query.limit:
                break
        return out

    def _behind(self, listed: list[Release], manifest: Manifest) -> bool:
        """Whether a build installed here is newer than every release in a (cached) listing:
        then the listing is older than what is on disk and is fetched again."""
        from ..versioning import version_key

        if not listed:
            return False
        newest = max(version_key(r.tag) for r in listed)
        return any(
            version_key(e.receipt.version) > newest for e in self.ctx.builds.installed(manifest.id)
        )

    async def choose(
        self,
        gh: GithubReleases,
        manifest: Manifest,
        variant: str,
        plat: str,
        version: str | None,
        refresh: bool,
    ) -> AssetChoice:
        """The assets to install: of ``version``, else of the newest release (stable first)
        that has a ``variant`` build for ``plat``."""
        from ..catalog.manifest import GithubSource
        from ..catalog.matching import match_release, unknown_variant

        source = manifest.source
        assert isinstance(source, GithubSource)
        known = manifest.variant(variant)
        if known is None:
            raise unknown_variant(manifest, variant)
        if not known.assets.get(plat):
            raise NotFound(f"no {variant} build of {manifest.id} is published for {plat}")
        driver = self.probe.host.nvidia_driver
        listed = await gh.releases(source.repo, refresh=refresh)
        if version is not None:
            release = next((r for r in listed if r.tag == version), None)
            if release is None:
                release = await gh.release_by_tag(source.repo, version, [r.tag for r in listed])
            return match_release(manifest, variant, release, plat, cuda_driver=driver)
        stable = [r for r in listed if manifest.allow_prerelease or not r.prerelease]
        pre = [r for r in listed if r.prerelease and not manifest.allow_prerelease]
        for group in (stable, pre):
            for release in group:
                with contextlib.suppress(NotFound):
                    return match_release(manifest, variant, release, plat, cuda_driver=driver)
        raise NotFound(f"no release of {source.repo} has a {variant} build for {plat}")

    async def versions(self, manifest: Manifest, *, prereleases: bool) -> list[Version]:
        """A package-index component's released versions, newest first."""
        listed = await self.index_releases(manifest, prereleases=prereleases)
        return [r.version for r in listed]

    async def index_releases(self, manifest: Manifest, *, prereleases: bool) -> list[IndexRelease]:
        """A package-index component's releases (version, Requires-Python, upload time),
        newest first."""
        from ..catalog.manifest import PypiSource
        from ..sources.pypi import package_releases

        source = manifest.source
        assert isinstance(source, PypiSource)
        return await package_releases(
            source.package,
            index_url=source.index_url,
            prereleases=prereleases,
            net=self.ctx.net,
            environ=self.ctx.environ,
        )


class _Marks:
    """For a version of one component: which of its variants are installed, and which one
    is activated."""

    def __init__(self, settings: Settings, builds: BuildStore, host: Host, component: str) -> None:
        self.settings = settings
        self.component = component
        self.entries = builds.installed(component)
        self.host = host

    def info(self, tag: str, published: str | None, pre: bool, variants: list[str]) -> ReleaseInfo:
        from ..api_models import ReleaseInfo

        row = self.settings.row(self.component)
        active = activated_id(self.settings, self.component)
        activated = (
            row.variant if row is not None and active is not None and row.version == tag else None
        )
        return ReleaseInfo(
            tag=tag,
            published_at=published,
            prerelease=pre,
            variants=variants,
            installed=sorted(e.receipt.variant for e in self.entries if e.receipt.version == tag),
            activated=activated,
            runs_here=[v for v in variants if self.host.why_not(v) is None],
        )
