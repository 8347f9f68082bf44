"""The end every install shares, archive or venv: run the staged build once (smoke check)
and read what it can do (probe), then write its receipt and commit it with one rename."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Protocol

import anyio

from .._version import __version__
from ..catalog.capabilities import Capabilities, kind_family
from ..catalog.manifest import Manifest, source_label
from .builds import BuildStore
from .probe import probe_build
from .smoke import smoke_check
from .store import AssetRecord, Receipt, folder_size

__all__ = ["check_staged", "commit_staged"]


async def check_staged(
    exe: Path, manifest: Manifest, *, smoke: bool, timeout: float | None = None
) -> Capabilities | None:
    """Run the staged executable with its version flag (bounded by ``timeout``, default the
    smoke check's) and, alongside, probe its ``--help`` (``smoke`` off: neither, and its
    capabilities stay unknown). A failed smoke check stops the probe and fails the install."""
    if not smoke:
        return None
    smoked = partial(smoke_check, exe, manifest.version_args, timeout=timeout)
    if not manifest.kind:  # a kindless tool (llama-swap) serves no model to probe for
        await smoked()
        return None
    early = kind_family(manifest.kind) == "llama"
    return await probe_build(exe, version=smoked, devices_early=early)


class Planned(Protocol):
    """What an archive or a venv plan says about the build it makes."""

    @property
    def manifest(self) -> Manifest: ...
    @property
    def version(self) -> str: ...
    @property
    def variant(self) -> str: ...
    @property
    def target(self) -> Path: ...


async def commit_staged(
    store: BuildStore,
    plan: Planned,
    staging: Path,
    exe: Path,
    capabilities: Capabilities | None,
    *,
    assets: Sequence[AssetRecord] = (),
    python: str | None = None,
    packages: dict[str, str] | None = None,
    tool_parsers: list[str] | None = None,
) -> Receipt:
    """Write the receipt into ``staging`` and rename it to the plan's target; a cancel cannot stop
    it half-way (the receipt is the only "installed" signal)."""
    manifest = plan.manifest
    receipt = Receipt(
        component=manifest.id,
        version=plan.version,
        variant=plan.variant,
        source=source_label(manifest.source),
        exe=exe.relative_to(staging).as_posix(),
        kind=manifest.kind,
        name=manifest.name,
        assets=list(assets),
        installed_at=datetime.now(UTC).isoformat(),
        size_bytes=folder_size(staging),
        backendmgr_version=__version__,
        capabilities=capabilities,
        python=python,
        packages=packages,
        tool_parsers=tool_parsers,
    )
    with anyio.CancelScope(shield=True):
        store.commit(staging, plan.target, receipt)
    return receipt
