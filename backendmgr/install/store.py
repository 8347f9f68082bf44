"""The build store: where builds are staged, committed, listed and removed (SPEC §7.4 to §7.7).

A build is "installed" exactly when its folder holds a valid receipt. Archive builds are
unpacked into ``<final>.staging-<random>`` and renamed into place with the receipt already
inside; venv builds are made in place and get their receipt last. Either way a crash leaves
the old state or the new one, and listing never shows a half-made build.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Literal

from filelock import FileLock, Timeout
from pydantic import BaseModel, ConfigDict, ValidationError

from .._fs import atomic_write_bytes, fsync_dir, sanitize_segment
from ..config.paths import Paths
from ..registry.rows import InstalledBuild, build_age_key, build_row_id

__all__ = ["RECEIPT", "AssetRecord", "BuildStore", "InstalledEntry", "Receipt"]

RECEIPT = ".backendmgr.json"
RECEIPT_VERSION = 1


class AssetRecord(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    url: str
    size: int
    sha256: str
    verified_by: Literal["digest", "checksums", "none"]


class Receipt(BaseModel):
    """The only "installed" signal. ``format`` lets a later backendmgr convert old receipts."""

    model_config = ConfigDict(frozen=True)

    format: int = RECEIPT_VERSION
    component: str
    version: str
    variant: str
    source: str
    exe: str
    kind: str = ""
    name: str = ""
    assets: list[AssetRecord] = []
    installed_at: datetime
    size_bytes: int = 0
    backendmgr_version: str
    python: str | None = None
    packages: dict[str, str] | None = None


@dataclass(frozen=True, slots=True)
class InstalledEntry:
    dir: Path
    receipt: Receipt

    @property
    def id(self) -> str:
        return build_row_id(self.receipt.component, self.receipt.version, self.receipt.variant)

    @property
    def exe_path(self) -> Path:
        return self.dir.joinpath(*self.receipt.exe.split("/"))

    def as_build(self) -> InstalledBuild:
        r = self.receipt
        return InstalledBuild(
            component=r.component,
            version=r.version,
            variant=r.variant,
            kind=r.kind,
            name=r.name,
            exe=str(self.exe_path),
            installed_at=r.installed_at,
        )


def folder_size(path: Path) -> int:
    total = 0
    for folder, _, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(folder, name)).st_size
    return total


def _is_scratch(name: str) -> bool:
    return ".staging-" in name or ".trash-" in name


class BuildStore:
    """All builds under ``<home>/builds``, one lock per build under ``<home>/locks``."""

    def __init__(self, paths: Paths) -> None:
        self.paths = paths

    def build_dir(self, component: str, version: str, variant: str) -> Path:
        return (
            self.paths.builds
            / sanitize_segment(component)
            / f"{sanitize_segment(version)}-{sanitize_segment(variant)}"
        )

    def lock(self, component: str, version: str, variant: str) -> FileLock:
        self.paths.locks.mkdir(parents=True, exist_ok=True)
        return FileLock(
            self._lock_path(
                sanitize_segment(component), self.build_dir(component, version, variant).name
            )
        )

    def _lock_path(self, component_dir: str, build_dir: str) -> Path:
        return self.paths.locks / f"{component_dir}@{build_dir}.lock"

    def read_receipt(self, folder: Path) -> Receipt | None:
        try:
            return Receipt.model_validate_json((folder / RECEIPT).read_bytes())
        except (OSError, ValidationError, ValueError):
            return None

    def get(self, component: str, version: str, variant: str) -> InstalledEntry | None:
        folder = self.build_dir(component, version, variant)
        receipt = self.read_receipt(folder)
        return InstalledEntry(folder, receipt) if receipt else None

    def installed(self, component: str | None = None) -> list[InstalledEntry]:
        """Committed builds, grouped by component, newest first within each."""
        entries: list[InstalledEntry] = []
        root = self.paths.builds
        components = (
            [root / sanitize_segment(component)]
            if component
            else (sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else [])
        )
        for comp_dir in components:
            if not comp_dir.is_dir():
                continue
            for folder in sorted(comp_dir.iterdir()):
                if _is_scratch(folder.name) or not folder.is_dir():
                    continue
                receipt = self.read_receipt(folder)
                if receipt is not None:
                    entries.append(InstalledEntry(folder, receipt))
        entries.sort(key=lambda e: build_age_key(e.as_build()), reverse=True)
        entries.sort(key=lambda e: e.receipt.component)  # stable: newest first within each
        return entries

    def installed_builds(self) -> dict[str, list[InstalledBuild]]:
        out: dict[str, list[InstalledBuild]] = {}
        for entry in self.installed():
            out.setdefault(entry.receipt.component, []).append(entry.as_build())
        return out

    # --- writing ---------------------------------------------------------------------------

    def new_staging(self, final: Path) -> Path:
        final.parent.mkdir(parents=True, exist_ok=True)
        return Path(tempfile.mkdtemp(prefix=f"{final.name}.staging-", dir=final.parent))

    def write_receipt(self, folder: Path, receipt: Receipt) -> None:
        atomic_write_bytes(folder / RECEIPT, receipt.model_dump_json(indent=2).encode())

    def commit(self, staging: Path, final: Path, receipt: Receipt) -> None:
        """Receipt into staging, then one rename; an old build is swapped aside, then deleted."""
        self.write_receipt(staging, receipt)
        trash: Path | None = None
        if final.exists():
            trash = Path(tempfile.mkdtemp(prefix=f"{final.name}.trash-", dir=final.parent))
            os.replace(final, trash / "old")
        try:
            os.replace(staging, final)
        except BaseException:
            if trash is not None and not final.exists():
                os.replace(trash / "old", final)
            raise
        fsync_dir(final.parent)
        if trash is not None:
            shutil.rmtree(trash, ignore_errors=True)

    def remove(self, entry: InstalledEntry) -> None:
        """Rename aside first so that a crash mid-delete never leaves a half build listed."""
        trash = Path(tempfile.mkdtemp(prefix=f"{entry.dir.name}.trash-", dir=entry.dir.parent))
        os.replace(entry.dir, trash / "old")
        fsync_dir(entry.dir.parent)
        shutil.rmtree(trash, ignore_errors=True)

    def leftovers(self) -> list[Path]:
        """Staging and trash folders, and build folders without a valid receipt."""
        found: list[Path] = []
        root = self.paths.builds
        if not root.is_dir():
            return found
        for comp_dir in sorted(p for p in root.iterdir() if p.is_dir()):
            for folder in sorted(comp_dir.iterdir()):
                if folder.is_dir() and (
                    _is_scratch(folder.name) or self.read_receipt(folder) is None
                ):
                    found.append(folder)
        return found

    def remove_leftovers(self) -> list[Path]:
        """Delete leftovers whose build lock is free (an install in progress keeps its own)."""
        removed: list[Path] = []
        for folder in self.leftovers():
            base = folder.name.split(".staging-")[0].split(".trash-")[0]
            self.paths.locks.mkdir(parents=True, exist_ok=True)
            try:
                with FileLock(self._lock_path(folder.parent.name, base)).acquire(timeout=0):
                    shutil.rmtree(folder, ignore_errors=True)
                    removed.append(folder)
            except Timeout:
                continue
        return removed

    def part_files(self) -> list[Path]:
        d = self.paths.downloads
        return sorted(d.glob("*.part")) if d.is_dir() else []
