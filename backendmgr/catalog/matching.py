"""Which release asset is the build for a variant on a platform (SPEC §5). Pure functions.

Patterns are anchored regexes, most preferred first: the primary asset is the first asset that
the first pattern with any match matches. Extras (the Windows CUDA runtime) are paired with the
primary through ``pair_key`` so that a CUDA 12.4 build never gets the 13.4 runtime.
"""

from __future__ import annotations

import re

from ..errors import BackendmgrError, NotFound, unknown
from ..immutable import frozen
from ..sources.models import Release, ReleaseAsset
from .host import Host
from .manifest import Manifest, Variant

__all__ = [
    "AssetChoice",
    "checksum_assets",
    "cuda_major_for_driver",
    "match_release",
    "suggest_variant",
    "variants_in_release",
]


@frozen(slots=True)
class AssetChoice:
    release: Release
    variant: str
    primary: ReleaseAsset
    extras: tuple[ReleaseAsset, ...] = ()

    @property
    def assets(self) -> tuple[ReleaseAsset, ...]:
        return (self.primary, *self.extras)


def cuda_major_for_driver(driver: str | None) -> int | None:
    """Highest CUDA major version an NVIDIA driver runs; None when the driver is unknown."""
    if not driver:
        return None
    try:
        major = int(driver.strip().split(".")[0])
    except ValueError:
        return None
    return 13 if major >= 580 else 12


def _flags(manifest: Manifest) -> int:
    return re.IGNORECASE if manifest.ignore_case else 0


def _version_tuple(text: str) -> tuple[int, ...]:
    """Numbers in an asset's version; a run too long to be a version (a crafted name) is 0."""
    return tuple(int(p) if len(p) <= 18 else 0 for p in re.findall(r"\d+", text))


def _pick_toolkit(
    hits: list[ReleaseAsset], key: str, driver: str | None, release: Release, variant: str
) -> ReleaseAsset:
    found: list[tuple[tuple[int, ...], ReleaseAsset]] = []
    for asset in hits:
        match = re.search(key, asset.name, re.IGNORECASE)
        found.append((_version_tuple(match.group(1)) if match else (), asset))
    limit = cuda_major_for_driver(driver)
    allowed = [f for f in found if limit is None or not f[0] or f[0][0] <= limit]
    if not allowed:
        shipped = ", ".join(".".join(map(str, v)) for v, _ in found)
        raise NotFound(
            f"release {release.tag} ships {variant} builds for CUDA {shipped} only, which need a "
            f"newer NVIDIA driver than {driver}; update the driver or pick another variant"
        )
    # max() keeps the first of equal toolkits, so the release's own order breaks ties.
    return max(allowed, key=lambda f: f[0])[1]


def _first_hits(
    patterns: list[str], assets: tuple[ReleaseAsset, ...], flags: int
) -> list[ReleaseAsset]:
    for pattern in patterns:
        rx = re.compile(pattern, flags)
        hits = [a for a in assets if rx.fullmatch(a.name)]
        if hits:
            return hits
    return []


def variants_in_release(manifest: Manifest, release: Release, platform: str) -> list[str]:
    """The variants of ``manifest`` that ``release`` ships for ``platform``."""
    flags = _flags(manifest)
    return [
        v.id
        for v in manifest.variants
        if v.assets.get(platform) and _first_hits(v.assets[platform], release.assets, flags)
    ]


def _variant(manifest: Manifest, variant_id: str) -> Variant:
    variant = manifest.variant(variant_id)
    if variant is None:
        raise unknown_variant(manifest, variant_id)
    return variant


def unknown_variant(manifest: Manifest, variant_id: str) -> BackendmgrError:
    """The error for a variant the manifest does not define, with the nearest names."""
    names = [v.id for v in manifest.variants]
    return unknown(
        f'{manifest.id} has no variant "{variant_id}"',
        variant_id,
        names,
        hint=f"known variants: {', '.join(names)}",
        always_hint=True,
    )


def match_release(
    manifest: Manifest,
    variant_id: str,
    release: Release,
    platform: str,
    *,
    cuda_driver: str | None = None,
) -> AssetChoice:
    """The primary asset (and its extras) of ``release`` for one variant on one platform."""
    variant = _variant(manifest, variant_id)
    patterns = variant.assets.get(platform)
    if not patterns:
        raise NotFound(f"no {variant_id} build of {manifest.id} is published for {platform}")
    flags = _flags(manifest)
    hits = _first_hits(patterns, release.assets, flags)
    if not hits:
        ships = variants_in_release(manifest, release, platform)
        what = f"it ships {', '.join(ships)}" if ships else "it ships nothing for this platform"
        raise NotFound(f"release {release.tag} has no {variant_id} asset for {platform}; {what}")
    if variant.toolkit_key and len(hits) > 1:
        primary = _pick_toolkit(hits, variant.toolkit_key, cuda_driver, release, variant_id)
    else:
        primary = hits[0]
    return AssetChoice(
        release, variant_id, primary, _extras(variant, primary, release, platform, flags)
    )


def _extras(
    variant: Variant, primary: ReleaseAsset, release: Release, platform: str, flags: int
) -> tuple[ReleaseAsset, ...]:
    patterns = variant.extras.get(platform, [])
    if not patterns:
        return ()
    pair: str | None = None
    if variant.pair_key:
        match = re.search(variant.pair_key, primary.name, re.IGNORECASE)
        pair = match.group(1) if match and match.groups() else None
    usable = []
    for pattern in patterns:
        if "{v}" in pattern:
            if pair is None:
                continue  # the pair value is unknown: never guess another version's runtime
            pattern = pattern.replace("{v}", re.escape(pair))
        usable.append(pattern)
    hits = _first_hits(usable, release.assets, flags)
    if not hits:
        raise NotFound(
            f"release {release.tag} has {primary.name} but not the companion archive it needs "
            f"({', '.join(usable) or 'no usable pattern'})"
        )
    return (hits[0],)


# Checksum files as releases name them: SHA256SUMS, checksums.txt, tool_1.0_checksums.txt,
# sha512sums.txt. A file for one asset is that asset's name plus .sha256/.sha512(sum).
_SHARED_SUMS = re.compile(
    r"(?:.*[._-])?(?:sha(?:1|224|256|384|512)sums?|md5sums?|checksums?)(?:\.txt)?", re.IGNORECASE
)
_OWN_SUMS = r"{}\.(?:sha(?:1|224|256|384|512)(?:sum)?|md5)"


def checksum_assets(
    manifest: Manifest, release: Release, assets: tuple[ReleaseAsset, ...]
) -> list[tuple[ReleaseAsset, str | None]]:
    """Every checksum file in ``release`` that may name one of ``assets``, with the asset it
    is for when the file serves one asset only (``<asset>.sha256``), else None."""
    wanted = {a.name for a in assets}
    pattern = re.compile(manifest.checksums, _flags(manifest)) if manifest.checksums else None
    found: list[tuple[ReleaseAsset, str | None]] = []
    for candidate in release.assets:
        if candidate.name in wanted:
            continue
        owner = next(
            (
                a.name
                for a in assets
                if re.fullmatch(_OWN_SUMS.format(re.escape(a.name)), candidate.name, re.I)
            ),
            None,
        )
        if owner is not None:
            found.append((candidate, owner))
        elif _SHARED_SUMS.fullmatch(candidate.name) or (
            pattern is not None and pattern.fullmatch(candidate.name)
        ):
            found.append((candidate, None))
    return found


NATIVE_API: dict[str, tuple[str, ...]] = {"amd": ("rocm",), "intel": ("sycl", "openvino")}
"""Each vendor's own compute variants, tried when a component has no vulkan build."""


def suggest_variant(manifest: Manifest, host: Host, platform: str | None = None) -> tuple[str, str]:
    """The variant to install when none is named, and why."""
    platform = platform or host.platform
    available = [v.id for v in manifest.variants_on(platform)]
    if not available:
        return "", f"{manifest.id} publishes nothing for {platform}"
    vendors = [a.vendor for a in host.adapters]
    if "nvidia" in vendors:
        name = next(a.name for a in host.adapters if a.vendor == "nvidia")
        wanted, why = (
            ("cuda", f"NVIDIA adapter ({name})")
            if "cuda" in available
            else ("vulkan", f"NVIDIA adapter ({name}), no cuda build for {platform}")
        )
    elif "apple" in vendors:
        wanted, why = "metal", "Apple GPU"
    elif vendors:
        first = host.adapters[0]
        wanted, why = "vulkan", f"{first.vendor.upper()} adapter ({first.name})"
    else:
        wanted, why = "cpu", "no GPU adapter found"
    if wanted in available:
        return wanted, why
    # Without the wanted build, the adapter's own compute API, then the CPU: never another
    # vendor's (a cuda build on an AMD card cannot use it).
    vendor = host.adapters[0].vendor if host.adapters else ""
    for fallback in (*NATIVE_API.get(vendor, ()), "cpu"):
        if fallback in available:
            return fallback, f"{why}; {manifest.id} has no {wanted} build, so {fallback}"
    return available[0], f"{why}; {manifest.id} has no {wanted} build, so {available[0]}"
