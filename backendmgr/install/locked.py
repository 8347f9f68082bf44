"""Checks that hold an install to a lock file's record (``backendmgr sync``): the same asset
names, every server digest agreeing with the lock, the downloaded bytes hashing to it, and a
venv holding exactly the locked distributions."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..errors import InstallFailed, VerificationError
from ..sources.models import ReleaseAsset
from .download import Downloaded, discard

__all__ = ["check_locked_assets", "check_locked_packages", "verify_locked"]


def check_locked_assets(assets: Sequence[ReleaseAsset], expected: Mapping[str, str]) -> None:
    """Before any download: the release offers exactly the locked assets, and any SHA-256 the
    server publishes is the lock's (a disagreement names both)."""
    names = sorted(a.name for a in assets)
    if names != sorted(expected):
        raise VerificationError(
            f"the release offers {', '.join(names) or 'no assets'} but the lock lists "
            f"{', '.join(sorted(expected)) or 'none'}; nothing was installed"
        )
    for asset in assets:
        published = asset.sha256
        if published is not None and published != expected[asset.name]:
            raise VerificationError(
                f"{asset.name}: the server publishes sha256:{published} but the lock says "
                f"sha256:{expected[asset.name]}; nothing was installed"
            )


def verify_locked(asset: ReleaseAsset, got: Downloaded, expected: str) -> None:
    """After the download: its bytes hash to the lock's SHA-256, else they are deleted."""
    if got.sha256 != expected:
        discard(got.path)
        raise VerificationError(
            f"{asset.name}: downloaded bytes have sha256:{got.sha256} but the lock says "
            f"sha256:{expected}; nothing was installed"
        )


def check_locked_packages(have: Mapping[str, str], pins: Sequence[tuple[str, str]]) -> None:
    """A venv made from a lock holds exactly the locked distributions, no more, no fewer."""
    from packaging.utils import canonicalize_name  # a venv's check: an archive needs none

    got = {canonicalize_name(k): v for k, v in have.items()}
    want = {canonicalize_name(k): v for k, v in pins}
    if got == want:
        return
    diffs = [
        f"{name} {got.get(name, 'missing')} (locked {want.get(name, 'absent')})"
        for name in sorted(set(got) | set(want))
        if got.get(name) != want.get(name)
    ]
    more = f" and {len(diffs) - 3} more" if len(diffs) > 3 else ""
    raise InstallFailed(
        f"the environment does not match the lock: {', '.join(diffs[:3])}{more}; nothing was "
        "installed"
    )
