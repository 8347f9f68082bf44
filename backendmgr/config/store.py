"""The config file on disk: read (from its parsed snapshot while that matches the bytes),
and locked atomic edits.

A write never re-serialises the whole file from the models: :mod:`.roundtrip` walks the
user's document and changes only the values that differ from the new settings, so comments,
key order and quoting survive everywhere else, and an edit that changes nothing writes
nothing. A read of an unchanged config loads no YAML library at all.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from pydantic import ValidationError

from .._fs import atomic_write_bytes
from .._yaml import parser_name, read_limited
from ..changes import config_written
from ..errors import ConfigError, Refused
from .models import Settings
from .snapshot import load_snapshot, save_snapshot

if TYPE_CHECKING:
    from .roundtrip import LoadedConfig

__all__ = ["ConfigStore", "text_diff"]

T = TypeVar("T")

LOCK_TIMEOUT_S = 60.0


class ConfigStore:
    """Reads and edits one config file; every edit is a locked read-modify-write."""

    def __init__(self, path: Path, lock_path: Path | None = None) -> None:
        self.path = path
        self.lock_path = lock_path or path.with_name(path.name + ".lock")

    def read(self) -> Settings:
        """The settings, from the parsed snapshot beside the file while it matches the file's
        bytes (:mod:`.snapshot`), else parsed from the YAML (and the snapshot rewritten)."""
        raw = self._raw()
        if raw is None:
            return Settings()
        document = load_snapshot(self.path, raw, parser_name())
        if document is not None:
            try:
                return Settings.model_validate(document)
            except (ValidationError, RecursionError):
                pass  # a snapshot this version cannot read: parse the YAML
        from .roundtrip import parse, plain

        loaded = parse(self.path, raw)
        if loaded.doc is not None:
            save_snapshot(self.path, raw, parser_name(), plain(loaded.doc))
        return loaded.settings

    def load(self) -> LoadedConfig:
        """The settings and the YAML document they came from, for an edit or a dry run's
        diff (which writes nothing, not even the snapshot)."""
        from .roundtrip import empty, parse

        raw = self._raw()
        return empty() if raw is None else parse(self.path, raw)

    def _raw(self) -> bytes | None:
        try:
            return read_limited(self.path)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise ConfigError(f"cannot read {self.path}: {exc.strerror}") from exc

    def update(self, change: Callable[[Settings], tuple[Settings, T]]) -> T:
        """Apply ``change`` under the file lock; write only when the file's text changes."""
        from filelock import FileLock, Timeout  # an edit's: a read takes no lock

        from .roundtrip import plain, render_document

        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            with FileLock(self.lock_path, timeout=LOCK_TIMEOUT_S):
                loaded = self.load()
                new_settings, result = change(loaded.settings)
                doc, data = render_document(loaded, new_settings)
                if data != loaded.raw:
                    atomic_write_bytes(self.path, data)
                    save_snapshot(self.path, data, parser_name(), plain(doc))
                    config_written(self.path)  # for the command's result (issue 33)
                return result
        except Timeout as exc:
            raise Refused(
                f"{self.path} is locked by another backendmgr process; try again when it ends"
            ) from exc

    def preview(self, change: Callable[[Settings], tuple[Settings, T]]) -> tuple[T, str]:
        """``update`` up to the write, for a dry run: what ``change`` returned and the unified
        diff of the file's text ("" when the text would stay). Creates nothing, not even the
        lock file: a run that writes reads the file again under the lock."""
        from .roundtrip import render

        loaded = self.load()
        new_settings, result = change(loaded.settings)
        return result, text_diff(self.path, loaded.raw, render(loaded, new_settings))


def text_diff(path: Path, old: bytes, new: bytes) -> str:
    """A unified diff of one file's two texts, as ``diff -u`` names it."""
    import difflib

    name = str(path)
    lines = difflib.unified_diff(
        old.decode("utf-8", "replace").splitlines(keepends=True),
        new.decode("utf-8", "replace").splitlines(keepends=True),
        fromfile=name,
        tofile=name,
    )
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)
