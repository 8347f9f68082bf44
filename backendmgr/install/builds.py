"""The build store as reads see it: where a build is committed (file names alone), which
builds are committed, and which folders are leftovers (SPEC §7.4 to §7.7).

Staging, committing, removing and tidying live in :mod:`.store`, with what only they need
(tempfile, shutil, file locks); the methods here that do them import it when called, so a
read (``list``, ``backends``, ``which``, ``models``, completion) never loads it. Receipts are
read by :mod:`.receipt`, loaded only when a build folder is opened."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._fs import sanitize_segment

if TYPE_CHECKING:
    from pathlib import Path

    from filelock import FileLock

    from ..config.paths import Paths
    from ..registry.installed import InstalledBuild
    from .receipt import InstalledEntry, Receipt

__all__ = ["BuildStore"]

_SCRATCH = (".staging-", ".trash-", ".swap-")


def is_scratch(name: str) -> bool:
    """A staging, trash or swap folder: never a build, whatever it holds."""
    return any(mark in name for mark in _SCRATCH)


def base_name(name: str) -> str:
    """The build folder a staging, trash or swap folder belongs to."""
    for mark in _SCRATCH:
        name = name.split(mark)[0]
    return name


def taken(folder: Path, receipt: Receipt, component: str, version: str, variant: str) -> None:
    """Refuse ``folder`` for ``component@version-variant`` when its ``receipt`` is another
    build's: two release tags that sanitise to one folder name."""
    if (receipt.component, receipt.version, receipt.variant) == (component, version, variant):
        return
    from ..errors import Refused
    from ..registry.rows import build_row_id

    held = build_row_id(receipt.component, receipt.version, receipt.variant)
    asked = build_row_id(component, version, variant)
    raise Refused(
        f"{asked} would use the build folder {folder}, which holds {held}: the two names "
        f"share one folder; uninstall {held} first"
    )


class BuildStore:
    """All builds under ``<home>/builds``, one lock per build under ``<home>/locks``."""

    def __init__(self, paths: Paths) -> None:
        self.paths = paths

    # --- layout and reading ----------------------------------------------------------------

    def build_dir(self, component: str, version: str, variant: str) -> Path:
        return (
            self.paths.builds
            / sanitize_segment(component)
            / f"{sanitize_segment(version)}-{sanitize_segment(variant)}"
        )

    def lock_path(self, component_dir: str, build_dir: str) -> Path:
        return self.paths.locks / f"{component_dir}@{build_dir}.lock"

    def read_receipt(self, folder: Path) -> Receipt | None:
        """The receipt in ``folder``, or None when there is none or it is not one this
        backendmgr can read (corrupt, foreign, a version it could not install)."""
        from .receipt import read_receipt

        return read_receipt(folder)

    def get(self, component: str, version: str, variant: str) -> InstalledEntry | None:
        """The committed build ``component`` ``version`` ``variant``, or None. Its folder name
        is sanitised (``b100/evil`` and ``b100_evil`` are both ``b100_evil``), so a receipt
        there naming another build is refused (:func:`taken`): never that build installed,
        never a folder to install over."""
        from .receipt import InstalledEntry

        folder = self.build_dir(component, version, variant)
        receipt = self.read_receipt(folder)
        if receipt is None:
            return None
        taken(folder, receipt, component, version, variant)
        return InstalledEntry(folder, receipt)

    def installed(self, component: str | None = None) -> list[InstalledEntry]:
        """Committed builds, grouped by component, newest first within each."""
        entries: list[InstalledEntry] = []
        root = self.paths.builds
        components = (
            [root / sanitize_segment(component)]
            if component
            else (sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else [])
        )
        if not components:
            return entries
        from .receipt import InstalledEntry

        for comp_dir in components:
            if not comp_dir.is_dir():
                continue
            for folder in sorted(comp_dir.iterdir()):
                if is_scratch(folder.name) or not folder.is_dir():
                    continue
                receipt = self.read_receipt(folder)
                if receipt is not None:
                    entries.append(InstalledEntry(folder, receipt))
        if entries:
            from ..registry.installed import build_age_key

            entries.sort(key=lambda e: build_age_key(e.as_build()), reverse=True)
            entries.sort(key=lambda e: e.receipt.component)  # stable: newest first within each
        return entries

    def installed_builds(self) -> dict[str, list[InstalledBuild]]:
        out: dict[str, list[InstalledBuild]] = {}
        for entry in self.installed():
            out.setdefault(entry.receipt.component, []).append(entry.as_build())
        return out

    def leftovers(self) -> list[Path]:
        """Staging and trash folders, and build folders without a valid receipt."""
        found: list[Path] = []
        root = self.paths.builds
        if not root.is_dir():
            return found
        for comp_dir in sorted(p for p in root.iterdir() if p.is_dir()):
            for folder in sorted(comp_dir.iterdir()):
                if folder.is_dir() and (
                    is_scratch(folder.name) or self.read_receipt(folder) is None
                ):
                    found.append(folder)
        return found

    def part_files(self) -> list[Path]:
        d = self.paths.downloads
        return sorted(d.glob("*.part")) if d.is_dir() else []

    # --- writing: in :mod:`.store`, loaded by the first install, removal or tidy -----------

    def lock(self, component: str, version: str, variant: str) -> FileLock:
        from . import store

        return store.build_lock(self, component, version, variant)

    def part_lock(self, part: Path) -> FileLock:
        """Held by an install for each of its part files while it may still read them."""
        from . import store

        return store.part_lock(self, part)

    def new_staging(self, final: Path) -> Path:
        from . import store

        return store.new_staging(final)

    def write_receipt(self, folder: Path, receipt: Receipt) -> None:
        from . import store

        store.write_receipt(folder, receipt)

    def commit(self, staging: Path, final: Path, receipt: Receipt) -> None:
        """See :func:`.store.commit`: a crash leaves the old build or the new one. An old
        build of another release (its tag sanitised to the same folder) is never replaced."""
        from . import store

        old = self.read_receipt(final)
        if old is not None:
            taken(final, old, receipt.component, receipt.version, receipt.variant)

        store.commit(staging, final, receipt)

    def remove(self, entry: InstalledEntry) -> None:
        from . import store

        store.remove(entry)

    def tidy(self) -> tuple[list[Path], list[Path]]:
        """See :func:`.store.tidy`: the builds restored and the folders removed."""
        from . import store

        groups: dict[tuple[Path, str], list[Path]] = {}
        for folder in self.leftovers():
            groups.setdefault((folder.parent, base_name(folder.name)), []).append(folder)
        return store.tidy(self, groups)

    def busy(self, leftover: Path) -> bool:
        """Whether a running install or removal holds the build lock of ``leftover`` (a
        staging, swap or trash folder, or a part file): its work, not a leftover yet."""
        from filelock import FileLock, Timeout

        if leftover.name.endswith(".part"):
            lock = self.part_lock(leftover)
        else:
            path = self.lock_path(leftover.parent.name, base_name(leftover.name))
            if not path.exists():  # never taken: nobody holds it
                return False
            lock = FileLock(path)
        try:
            lock.acquire(timeout=0)
        except Timeout:
            return True
        lock.release()
        return False

    def remove_leftovers(self) -> list[Path]:
        """Delete leftovers whose build lock is free; see :meth:`tidy`."""
        return self.tidy()[1]

    def remove_part_files(self) -> list[Path]:
        """Delete part files (and their ETag notes) that no running install holds."""
        from . import store

        return store.remove_part_files(self)
