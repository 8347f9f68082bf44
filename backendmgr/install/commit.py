"""The end every install shares, archive or venv: run the staged build once (smoke check)
and read what it can do (probe), then write its receipt and commit it with one rename."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import anyio

from .._version import __version__
from ..catalog.capabilities import Capabilities
from ..catalog.manifest import Manifest, source_label
from .probe import probe_build
from .smoke import smoke_check
from .store import AssetRecord, BuildStore, Receipt, folder_size

__all__ = ["check_staged", "commit_staged"]


async def check_staged(exe: Path, manifest: Manifest, *, smoke: bool) -> Capabilities | None:
    """Run the staged executable with its version flag and probe its ``--help`` (``smoke``
    off: neither, and its capabilities stay unknown)."""
    if not smoke:
        return None
    said = await smoke_check(exe, manifest.version_args)
    return await probe_build(exe, version_text=said)


async def commit_staged(
    store: BuildStore,
    staging: Path,
    target: Path,
    exe: Path,
    manifest: Manifest,
    version: str,
    variant: str,
    *,
    capabilities: Capabilities | None,
    assets: Sequence[AssetRecord] = (),
    python: str | None = None,
    packages: dict[str, str] | None = None,
    tool_parsers: list[str] | None = None,
) -> Receipt:
    """Write the receipt into ``staging`` and rename it to ``target``; a cancel cannot stop
    it half-way (the receipt is the only "installed" signal)."""
    receipt = Receipt(
        component=manifest.id,
        version=version,
        variant=variant,
        source=source_label(manifest.source),
        exe=exe.relative_to(staging).as_posix(),
        kind=manifest.kind,
        name=manifest.name,
        assets=list(assets),
        installed_at=datetime.now(UTC),
        size_bytes=folder_size(staging),
        backendmgr_version=__version__,
        capabilities=capabilities,
        python=python,
        packages=packages,
        tool_parsers=tool_parsers,
    )
    with anyio.CancelScope(shield=True):
        store.commit(staging, target, receipt)
    return receipt
