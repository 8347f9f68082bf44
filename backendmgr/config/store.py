"""The config file on disk: read (from its parsed snapshot while that matches the bytes),
and locked atomic edits.

A write never re-serialises the whole file from the models: :mod:`.roundtrip` walks the
user's document and changes only the values that differ from the new settings, so comments,
key order and quoting survive everywhere else, and an edit that changes nothing writes
nothing. A read of an unchanged config loads no YAML library and no pydantic at all: the
snapshot holds the settings as validated, and :func:`..record.load` reads them back.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from .._fs import atomic_write_bytes, folder_for, remove_leftover_temps
from .._yaml import parser_name, read_limited
from ..errors import ConfigError, Refused
from ..record import Invalid, load, plain
from .models import Settings
from .snapshot import load_snapshot, save_snapshot, snapshot_path

if TYPE_CHECKING:
    from ruamel.yaml.comments import CommentedMap

    from .roundtrip import LoadedConfig

__all__ = ["ConfigStore", "Then", "text_diff"]

T = TypeVar("T")
R = TypeVar("R")

Then = Callable[[Settings, Callable[[], None]], R]
"""What :meth:`ConfigStore.transact` runs under the lock: given the settings the config will
say and the function that writes it."""

LOCK_TIMEOUT_S = 60.0


class ConfigStore:
    """Reads and edits one config file; every edit is a locked read-modify-write."""

    def __init__(self, path: Path, lock_path: Path | None = None) -> None:
        self.path = path
        self.lock_path = lock_path or path.with_name(path.name + ".lock")
        # the bytes last read or written and the settings they validate to: an edit reads the
        # config four times (its checks, under the lock, the adoption, the plan), each time
        # whole from the disk, and reads the same bytes again only while they are the same
        self._known: tuple[bytes, Settings] | None = None

    def read(self) -> Settings:
        """The settings, from the parsed snapshot beside the file while it matches the file's
        bytes (:mod:`.snapshot`), else parsed from the YAML (and the snapshot rewritten)."""
        raw = self._raw()
        if raw is None:
            return Settings()
        kept = self._kept(raw)
        if kept is not None:
            return kept
        from .roundtrip import parse

        loaded = parse(self.path, raw)
        if loaded.doc is not None:
            save_snapshot(self.path, raw, parser_name(), _snapshot_of(loaded.settings))
            self._known = (raw, loaded.settings)
        return loaded.settings

    def load(self) -> LoadedConfig:
        """The settings and the YAML document they came from, for an edit or a dry run's
        diff (which writes nothing, not even the snapshot). The document is parsed for the
        edit; the settings come from the snapshot while it matches the bytes, so an edit of
        a config already read validates nothing again (and imports no pydantic)."""
        from .roundtrip import empty, parse

        raw = self._raw()
        return empty() if raw is None else parse(self.path, raw, self._kept(raw))

    def _kept(self, raw: bytes) -> Settings | None:
        """The settings this store last saw ``raw`` validate to, else those the snapshot holds
        for exactly ``raw``, or None."""
        known = self._known
        if known is not None and known[0] == raw:
            return known[1]
        document = load_snapshot(self.path, raw, parser_name())
        if document is None:
            return None
        try:
            settings = load(Settings, document, "snapshot")
        except Invalid:
            return None  # a snapshot this version cannot read: the YAML is parsed
        self._known = (raw, settings)
        return settings

    def _raw(self) -> bytes | None:
        try:
            return read_limited(self.path)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise ConfigError(f"cannot read {self.path}: {exc.strerror}") from exc

    def update(self, change: Callable[[Settings], tuple[Settings, T]]) -> T:
        """Apply ``change`` under the file lock; write only when the file's text changes."""
        return self._edit(change, _write_only, strict=False)[0]

    def transact(
        self, change: Callable[[Settings], tuple[Settings, T]], then: Then[R]
    ) -> tuple[T, R]:
        """``update``, and ``then`` under the same lock, given the settings the file will say
        and the function that writes it: ``then`` checks what it will write of its own first,
        calls that function, then writes its own files. What raises before the config is
        written leaves it as it was (a text that does not read back as settings is refused
        too); what raises after has the config's old bytes put back, while it still holds
        ours (no other backendmgr writes it meanwhile: the lock is held)."""
        return self._edit(change, then, strict=True)

    def _edit(
        self, change: Callable[[Settings], tuple[Settings, T]], then: Then[R], *, strict: bool
    ) -> tuple[T, R]:
        from filelock import FileLock, Timeout  # an edit's: a read takes no lock

        from .roundtrip import render_document

        folder_for(self.path, "the config")
        try:
            with FileLock(self.lock_path, timeout=LOCK_TIMEOUT_S):
                # a write killed before its rename left its temporary file: gone with the next
                remove_leftover_temps(self.path, snapshot_path(self.path))
                loaded = self.load()
                new_settings, result = change(loaded.settings)
                doc, data = render_document(loaded, new_settings)
                if data == loaded.raw:
                    return result, then(loaded.settings, _nothing)
                try:  # what the file will say, as the next read gives it
                    said: Settings | None = _said(self.path, doc)
                except ConfigError:
                    if strict:
                        raise
                    said = None  # the next read will say why
                existed = bool(loaded.raw) or self.path.exists()
                wrote = False

                def write() -> None:
                    nonlocal wrote
                    atomic_write_bytes(self.path, data)
                    wrote = True
                    if said is not None:
                        save_snapshot(self.path, data, parser_name(), _snapshot_of(said))
                        self._known = (data, said)
                    from ..changes import config_written

                    config_written(self.path)  # for the command's result (issue 33)

                try:
                    return result, then(new_settings if said is None else said, write)
                except BaseException:
                    if wrote:
                        self._put_back(loaded.raw if existed else None, data)
                    raise
        except Timeout as exc:
            raise Refused(
                f"{self.path} is locked by another backendmgr process; try again when it ends"
            ) from exc

    def _put_back(self, old: bytes | None, ours: bytes) -> None:
        """The config's ``old`` bytes (None: there was no file) in place of ``ours``, unless
        the file holds others by now (a hand edit meanwhile is the user's to keep)."""
        self._known = None
        with contextlib.suppress(OSError, ConfigError):
            if read_limited(self.path) != ours:
                return
            if old is None:
                self.path.unlink()
            else:
                atomic_write_bytes(self.path, old)

    def preview(self, change: Callable[[Settings], tuple[Settings, T]]) -> tuple[T, str]:
        """``update`` up to the write, for a dry run: what ``change`` returned and the unified
        diff of the file's text ("" when the text would stay). Creates nothing, not even the
        lock file: a run that writes reads the file again under the lock."""
        from .roundtrip import render

        loaded = self.load()
        new_settings, result = change(loaded.settings)
        return result, text_diff(self.path, loaded.raw, render(loaded, new_settings))


def _write_only(settings: Settings, write: Callable[[], None]) -> None:
    """``update``'s part under the lock: the config written, nothing else."""
    write()


def _nothing() -> None:
    """The write of a config whose text stays."""


def _snapshot_of(settings: Settings) -> dict[str, Any]:
    """``settings`` as the snapshot keeps them: the fields that differ from a default. A
    default left out is the class's own on reading back, so a whole-number default such as
    ``max_unpacked_gb: 32`` stays ``32`` as it does when the YAML is parsed (a float field
    reads an integer back as a float)."""
    defaults = plain(Settings())
    return {
        k: v
        for k, v in plain(settings).items()
        if not (k in defaults and v == defaults[k] and type(v) is type(defaults[k]))
    }


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


def _said(path: Path, doc: CommentedMap) -> Settings:
    """What the document just written says, for its snapshot: read strictly where its values
    already have their settings' types (an edit of a file backendmgr wrote: no pydantic),
    else validated as any person's YAML is."""
    from .roundtrip import plain as as_data
    from .roundtrip import settings_of

    try:
        return load(Settings, as_data(doc), "config")
    except Invalid:
        return settings_of(path, doc)
