"""Where manifests live and what each says as plain data, read without validating it (the
ids <TAB> offers are :mod:`.ids`'s).

Parsing YAML in pure Python costs more than everything else a command does with the manifests,
at every start, for files that change only with an upgrade, and so does pydantic's validation
(issue 30). So once a manifest is validated, the manifest it became is kept in the data home's
cache folder (``cache/manifests/``), stamped with the SHA-256 of the manifest's exact bytes and
the parser's version (:func:`..config.snapshot.load_parsed`): an *input* cache, read back with
:func:`backendmgr.record.load` (strict, every field check and rule again, no pydantic); any
other bytes are parsed and validated again.
"""

from __future__ import annotations

import contextlib
import stat
import zlib
from pathlib import Path
from typing import Any

from .._yaml import load_yaml, parser_name, read_limited
from ..config.locate import builtin_folder, manifest_names
from ..errors import ConfigError

__all__ = [
    "ManifestText",
    "builtin_manifest_dir",
    "manifest_files",
    "read_manifest",
]


def builtin_manifest_dir() -> Path:
    """The shipped manifests' folder (:func:`..config.locate.builtin_folder`)."""
    return Path(builtin_folder())


def manifest_files(user_dir: Path | None = None, builtin_dir: Path | None = None) -> list[Path]:
    """The built-in manifests, then the user's, in the order the catalog loads them."""
    folders = [builtin_dir or builtin_manifest_dir()]
    if user_dir is not None and user_dir.is_dir():
        folders.append(user_dir)
    return [folder / name for folder in folders for name in manifest_names(folder)]


def _kept_at(path: Path, cache: Path) -> Path | None:
    """Where ``path``'s parse is kept below ``cache`` (one file per manifest path, so an edit
    replaces it), or ``None`` when anything but a plain file and folder sits there: a file of
    ours is never read or written through a link we did not make (nor a FIFO opened). The
    name only picks the slot (a CRC of the path, no hash function to load): what is kept is
    believed only for the exact bytes and file its stamp names, so two paths that shared a
    slot would cost each other a parse, never a wrong manifest."""
    name = zlib.crc32(str(path.absolute()).encode("utf-8", "surrogateescape"))
    kept = cache / "manifests" / f"{name:08x}.json"
    try:
        if kept.parent.is_symlink() or not stat.S_ISREG(kept.lstat().st_mode):
            return None
    except FileNotFoundError:
        return kept
    except OSError:
        return None
    return kept


class ManifestText:
    """One manifest's exact bytes, and where what they say is kept below the cache folder."""

    __slots__ = ("kept_at", "path", "raw")

    def __init__(self, path: Path, raw: bytes, kept_at: Path | None) -> None:
        self.path = path
        self.raw = raw
        self.kept_at = kept_at
        """None: nothing is kept (no cache given, no data home yet, a link or a FIFO there)."""

    @classmethod
    def read(cls, path: Path, cache: Path | None = None) -> ManifestText:
        """Unreadable: one :class:`ConfigError` naming the file."""
        try:
            raw = read_limited(path)
        except OSError as exc:
            raise ConfigError(f"manifest {path}: {exc}") from exc
        kept = _kept_at(path, cache) if cache is not None and cache.parent.is_dir() else None
        return cls(path, raw, kept)

    @staticmethod
    def _stamp() -> str:
        # what is kept is the validated manifest, not the YAML's parse
        return f"{parser_name()} safe; validated"

    def kept(self) -> Any | None:
        """The plain document kept for exactly these bytes (a validated manifest, for
        :func:`backendmgr.record.load`), or None."""
        if self.kept_at is None:
            return None
        from ..config.snapshot import load_parsed

        return load_parsed(self.kept_at, self.path, self.raw, self._stamp())

    def parse(self) -> Any:
        """What the YAML says, as plain data; malformed: one :class:`ConfigError`."""
        try:
            text = self.raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ConfigError(f"manifest {self.path}: {exc}") from exc
        return load_yaml(text, f"manifest {self.path}")

    def keep(self, document: dict[str, Any]) -> None:
        """Keep ``document`` (the validated manifest these bytes say) for the next start;
        nothing is kept where it cannot be written: the parse only costs time."""
        if self.kept_at is None:
            return
        from ..config.snapshot import save_parsed

        with contextlib.suppress(OSError):
            self.kept_at.parent.mkdir(parents=True, exist_ok=True)  # cache/ and cache/manifests/
            if _kept_at(self.path, self.kept_at.parent.parent) is not None:
                save_parsed(self.kept_at, self.path, self.raw, self._stamp(), document)


def read_manifest(path: Path, cache: Path | None = None) -> Any:
    """What the manifest at ``path`` says, as plain data: what is kept for its bytes below
    ``cache`` (the data home's cache folder), else its YAML parsed; nothing is kept here (the
    catalog keeps each manifest once it is validated). Unreadable or malformed: one
    :class:`ConfigError` naming the file."""
    text = ManifestText.read(path, cache)
    kept = text.kept()
    return kept if kept is not None else text.parse()
