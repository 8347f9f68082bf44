"""The build store: where builds are staged, committed, listed and removed (SPEC §7.4 to §7.7).

A build is "installed" exactly when its folder holds a valid receipt. Archive builds are
unpacked, and venv builds are made, in ``<final>.staging-<random>`` and renamed into place with
the receipt already inside. A crash leaves the old state or the new one, and listing never shows
a half-made build.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass, field, fields
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from .._fs import (
    apply_umask,
    atomic_write_bytes,
    fsync_dir,
    read_regular,
    sanitize_segment,
    sync_filesystem,
)
from ..catalog.capabilities import Capabilities
from ..config.paths import Paths
from ..record import After, Before, Invalid, Limit, Record, instant, load, plain
from ..registry.rows import InstalledBuild, build_age_key, build_row_id

if TYPE_CHECKING:
    from filelock import FileLock

__all__ = ["RECEIPT", "AssetRecord", "BuildStore", "InstalledEntry", "Receipt", "receipt_json"]

RECEIPT = ".backendmgr.json"
RECEIPT_VERSION = 1
MAX_RECEIPT_BYTES = 16 << 20
"""A receipt lists a build's assets or packages: far below this; a bigger one is not ours."""


def _known(cls: type, data: Any) -> Any:
    """``data`` without the keys ``cls`` does not name: a receipt written by a later
    backendmgr, with a field this one does not know, is still a build."""
    if not isinstance(data, dict):
        return data
    names = {f.name for f in fields(cls)}
    return {k: v for k, v in data.items() if k in names}


def _usable_version(value: str) -> str:
    """A version that could not be installed today (a newline, a bidi override, thousands
    of digits) makes the receipt unusable: the folder is a leftover, not a build."""
    from ..sources.models import tag_problem

    problem = tag_problem(value)
    if problem is not None:
        raise ValueError(problem)
    return value


def _inside(value: str) -> str:
    """The executable, relative to the build folder and inside it, as installs write it: an
    absolute path or a ``..`` would make another program this build's."""
    if not value or value.startswith("/") or any(p in ("", ".", "..") for p in value.split("/")):
        raise ValueError(f"not a path inside the build folder: {value!r}")
    return value


def _capabilities_or_unknown(value: Any) -> Any:
    """A malformed probe record means "unknown"; it must never un-install the build."""
    try:
        load(Capabilities, _known(Capabilities, value), "capabilities")
    except Invalid:
        return None
    return _known(Capabilities, value)


def _assets(value: Any) -> Any:
    return [_known(AssetRecord, a) for a in value] if isinstance(value, list) else value


@dataclass(frozen=True, kw_only=True)
class AssetRecord(Record):
    name: str
    url: str
    size: Annotated[int, Limit(ge=0)]
    sha256: str
    verified_by: Literal["digest", "checksums", "none"]


@dataclass(frozen=True, kw_only=True)
class Receipt(Record):
    """The only "installed" signal. ``format`` lets a later backendmgr convert old receipts."""

    format: int = RECEIPT_VERSION
    component: str
    version: Annotated[str, After(_usable_version)]
    variant: str
    source: str
    exe: Annotated[str, After(_inside)]
    kind: str = ""
    name: str = ""
    assets: Annotated[list[AssetRecord], Before(_assets)] = field(default_factory=list)
    installed_at: Annotated[str, After(instant)]
    """ISO 8601 text, as the file holds it (:attr:`installed`: the time itself)."""
    size_bytes: Annotated[int, Limit(ge=0)] = 0
    backendmgr_version: str
    python: str | None = None
    packages: dict[str, str] | None = None
    tool_parsers: list[str] | None = None
    capabilities: Annotated[Capabilities | None, Before(_capabilities_or_unknown)] = None

    @property
    def installed(self) -> datetime:
        return datetime.fromisoformat(self.installed_at)


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
        """The receipt's fields the registry reads, with the executable's full path."""
        r = self.receipt
        return InstalledBuild(
            component=r.component,
            version=r.version,
            variant=r.variant,
            exe=str(self.exe_path),
            kind=r.kind,
            name=r.name,
            installed_at=r.installed,
        )


def receipt_json(receipt: Receipt) -> str:
    """The receipt as its file holds it (and as ``facts`` and ``models`` fingerprint it)."""
    return json.dumps(plain(receipt), indent=2, ensure_ascii=False)


def folder_size(path: Path) -> int:
    total = 0
    for folder, _, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(folder, name)).st_size
    return total


_SCRATCH = (".staging-", ".trash-", ".swap-")


def _is_scratch(name: str) -> bool:
    return any(mark in name for mark in _SCRATCH)


def _base_name(name: str) -> str:
    """The build folder a staging, trash or swap folder belongs to."""
    for mark in _SCRATCH:
        name = name.split(mark)[0]
    return name


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
        from filelock import FileLock  # installs and removals lock; a read lists unlocked

        self.paths.locks.mkdir(parents=True, exist_ok=True)
        return FileLock(
            self._lock_path(
                sanitize_segment(component), self.build_dir(component, version, variant).name
            )
        )

    def _lock_path(self, component_dir: str, build_dir: str) -> Path:
        return self.paths.locks / f"{component_dir}@{build_dir}.lock"

    def read_receipt(self, folder: Path) -> Receipt | None:
        """The receipt in ``folder``, or None when there is none or it is not a receipt this
        backendmgr can read (corrupt, foreign, a version it could not install)."""
        try:
            raw = read_regular(folder / RECEIPT, MAX_RECEIPT_BYTES)  # a FIFO: no receipt
            if len(raw) > MAX_RECEIPT_BYTES:
                return None
            return load(Receipt, _known(Receipt, json.loads(raw)), str(folder / RECEIPT))
        except (OSError, ValueError, RecursionError):  # Invalid and JSON errors are ValueErrors
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
        staging = Path(tempfile.mkdtemp(prefix=f"{final.name}.staging-", dir=final.parent))
        apply_umask(staging)  # the committed build gets the mode a plain mkdir would give
        return staging

    def write_receipt(self, folder: Path, receipt: Receipt) -> None:
        atomic_write_bytes(folder / RECEIPT, receipt_json(receipt).encode())

    def commit(self, staging: Path, final: Path, receipt: Receipt) -> None:
        """Receipt into staging, then one rename; an old build is swapped aside, then deleted.

        The old build waits in ``<final>.swap-*/old`` (not ``.trash-``) so that after a kill
        between the two renames ``doctor --fix`` can tell a swap to finish from a removal.
        The staged files reach the disk first, with one call for them all (no fsync per
        file): the receipt, fsynced, and the rename then only ever name a complete build."""
        sync_filesystem(staging)
        self.write_receipt(staging, receipt)
        trash: Path | None = None
        if final.exists():
            trash = Path(tempfile.mkdtemp(prefix=f"{final.name}.swap-", dir=final.parent))
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

    def _finish_swap(self, final: Path, scratch: list[Path]) -> Path | None:
        """After a kill inside a commit the build folder may be missing while complete copies
        wait beside it: the committed new build (a staging folder holding a receipt, written
        only once the build passed every check) wins, else the old one in ``.swap-*/old``."""
        if self.read_receipt(final) is not None:
            return None
        new = [f for f in scratch if ".staging-" in f.name and self.read_receipt(f) is not None]
        old = [
            f / "old"
            for f in scratch
            if ".swap-" in f.name and self.read_receipt(f / "old") is not None
        ]
        candidates = new or old
        if not candidates:
            return None
        candidates.sort(key=lambda f: f.stat().st_mtime, reverse=True)  # two kills: the last
        if final.is_dir():  # a folder without a valid receipt: never a build (§7.4)
            shutil.rmtree(final)
        os.replace(candidates[0], final)
        fsync_dir(final.parent)
        return final

    def remove_leftovers(self) -> list[Path]:
        """Delete leftovers whose build lock is free; see :meth:`tidy`."""
        return self.tidy()[1]

    def tidy(self) -> tuple[list[Path], list[Path]]:
        """Finish interrupted swaps, then delete leftovers whose build lock is free (an install
        in progress keeps its own). Returns the builds restored and the folders removed."""
        restored_all: list[Path] = []
        changed: list[Path] = []
        groups: dict[tuple[Path, str], list[Path]] = {}
        for folder in self.leftovers():
            groups.setdefault((folder.parent, _base_name(folder.name)), []).append(folder)
        self.paths.locks.mkdir(parents=True, exist_ok=True)
        from filelock import FileLock, Timeout

        for (comp_dir, base), folders in groups.items():
            try:
                with FileLock(self._lock_path(comp_dir.name, base)).acquire(timeout=0):
                    restored = self._finish_swap(comp_dir / base, folders)
                    if restored is not None:
                        restored_all.append(restored)
                    for folder in folders:
                        if folder.exists() and folder != restored:
                            shutil.rmtree(folder, ignore_errors=True)
                            changed.append(folder)
            except Timeout:
                continue
        return restored_all, changed

    def part_files(self) -> list[Path]:
        d = self.paths.downloads
        return sorted(d.glob("*.part")) if d.is_dir() else []

    def part_lock(self, part: Path) -> FileLock:
        """Held by an install for each of its part files while it may still read them."""
        from filelock import FileLock

        self.paths.locks.mkdir(parents=True, exist_ok=True)
        return FileLock(self.paths.locks / f"download@{part.name}.lock")

    def remove_part_files(self) -> list[Path]:
        """Delete part files (and their ETag notes) that no running install holds."""
        from filelock import Timeout

        removed: list[Path] = []
        for part in self.part_files():
            try:
                with self.part_lock(part).acquire(timeout=0):
                    part.unlink(missing_ok=True)
                    part.with_name(part.name + ".json").unlink(missing_ok=True)
                    removed.append(part)
            except Timeout:
                continue
        return removed
