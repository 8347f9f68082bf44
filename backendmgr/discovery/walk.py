"""Walking the model folders and reading headers, with a metadata cache (SPEC §10.1, §10.2).

A walk returns every candidate file with its size and mtime (the regeneration hash needs
exactly that), then GGUF headers are read only for files the cache does not know.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from .._fs import LinkRefused, atomic_write_bytes, read_regular
from ..record import MAX_DEPTH, Invalid, load
from .files import in_folder, walk_model_files
from .models import Discovery, FolderScan, build_models, model_ids, split_parts

__all__ = ["MetaCache", "Scan", "discover", "discover_ids", "scan_folders"]

CACHE_FORMAT = 1


class Scan:
    """The scanned folders, and (path, size, mtime_ns) of every model file (a plain class,
    immutable by type: a named tuple costs every read its making)."""

    __slots__ = ("folders", "inputs", "stopped")

    folders: Final[list[FolderScan]]
    inputs: Final[list[tuple[str, int, int]]]
    stopped: Final[list[str]]  # where a walk's bound stopped it, and why: warnings

    def __init__(
        self,
        folders: list[FolderScan],
        inputs: list[tuple[str, int, int]],
        stopped: list[str] | None = None,
    ) -> None:
        self.folders = folders
        self.inputs = inputs
        self.stopped = stopped or []


def scan_folders(dirs: list[str]) -> Scan:
    """Walk each folder recursively: links followed, cycles and hidden folders skipped."""
    folders: list[FolderScan] = []
    inputs: list[tuple[str, int, int]] = []
    stopped: list[str] = []
    for folder, files in walk_model_files(dirs, stopped):
        scan = FolderScan(path=folder)
        config_path: str | None = None
        for name, path, fst in files:
            inputs.append((path, fst.st_size, fst.st_mtime_ns))
            lowered = name.lower()
            if lowered.endswith(".gguf"):
                scan.ggufs[name] = fst.st_size
            elif lowered.endswith(".safetensors"):
                scan.safetensors[name] = fst.st_size
            else:
                config_path = path
        if config_path is not None and scan.safetensors and not scan.ggufs:
            scan.config = _read_config(config_path)
        if scan.ggufs or scan.safetensors:
            folders.append(scan)
    return Scan(folders, inputs, stopped)


MAX_CACHE_BYTES = 64 << 20  # a larger header cache is read as none (and written anew)
MAX_CONFIG_BYTES = 16 << 20  # a config.json is a few KB; a larger one is not read


def _read_config(path: str) -> dict[str, Any] | str:
    try:
        with open(path, "rb") as fh:
            raw = fh.read(MAX_CONFIG_BYTES + 1)
        if len(raw) > MAX_CONFIG_BYTES:
            return f"larger than {MAX_CONFIG_BYTES >> 20} MiB"
        data = json.loads(raw)
    except RecursionError:
        return "nested too deeply"
    except (OSError, ValueError) as exc:
        return f"unreadable ({type(exc).__name__}: {str(exc).splitlines()[0][:120]})"
    return data if isinstance(data, dict) else "not a JSON object"


Header = dict[str, Any] | str
"""A GGUF file's header fields, or why it could not be read."""


def _cached_entries(raw: bytes, where: str) -> dict[str, Any]:
    """The entries of the header cache :meth:`MetaCache.save` wrote, ``{"format": 1,
    "entries": {path: [size, mtime_ns, header]}}``, or none. Each entry is free-form data here
    (bounded in depth, no NaN, no lone surrogate, as :func:`~backendmgr.record.load` reads an
    ``Any``) and its shape is :meth:`MetaCache.get`'s to check: one of the wrong shape is a
    file not cached, and reading each entry as a typed record would cost a warm scan more
    than its use. Text decoded strictly as UTF-8 holds a lone surrogate only where an escape
    makes one, and the parse refuses a NaN: what is left to check is the depth, one walk over
    the containers (a file with such an escape, ``\\ud800`` to ``\\udfff`` or one of
    ``\\ud000`` to ``\\ud7ff``, is read by ``load``'s walk of every value)."""
    text = raw.decode()  # strict UTF-8, as written: another encoding is no cache of ours
    surrogate = "\\ud" in text or "\\uD" in text  # an escape of a surrogate, or like one
    data = json.loads(text) if surrogate else json.loads(text, parse_constant=_no_nan)
    if (
        not isinstance(data, dict)
        or data.keys() != {"format", "entries"}
        or type(data["format"]) is not int  # a boolean is no format
        or data["format"] != CACHE_FORMAT
    ):
        return {}
    if surrogate:
        return load(dict[str, Any], data["entries"], where)
    entries = data["entries"]
    if not isinstance(entries, dict):
        raise Invalid(f"{where}: expected a mapping")
    _nested_within(entries, where)
    return entries


def _no_nan(constant: str) -> float:
    """JSON's non-standard constants: the infinities as ``load`` reads them, never a NaN."""
    if constant == "NaN":
        raise Invalid("not a number (NaN)")
    return float(constant)


def _nested_within(entries: dict[str, Any], where: str) -> None:
    """Refuse an entry nested deeper than :data:`~backendmgr.record.MAX_DEPTH` (as ``load``
    bounds each ``Any``), looking only at containers (iterative: it cannot run out of stack)."""
    stack = [(value, 0) for value in entries.values() if type(value) in _CONTAINERS]
    while stack:
        item, depth = stack.pop()
        if depth >= MAX_DEPTH:
            raise Invalid(f"{where}: nested deeper than {MAX_DEPTH} levels")
        for value in item.values() if type(item) is dict else item:
            if type(value) in _CONTAINERS:
                stack.append((value, depth + 1))


_CONTAINERS = (dict, list)  # all JSON parses into besides scalars
_ENTRY = (list, tuple)  # as read, as put
_HEADER = (dict, str)  # a header, or why it could not be read


class MetaCache:
    """GGUF headers keyed by (path, size, mtime): a warm scan opens no model file."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.entries: dict[str, Any] = {}  # path → [size, mtime_ns, header], as written
        self.dirty = False
        if path is not None:
            try:  # an unreadable, foreign or malformed cache only costs reading the headers
                raw = read_regular(path, MAX_CACHE_BYTES, follow=False)
                if len(raw) > MAX_CACHE_BYTES:
                    raise ValueError("too large")
                self.entries = _cached_entries(raw, path.name)
            except (OSError, ValueError, RecursionError):  # Invalid is a ValueError
                self.entries = {}

    def get(self, path: str, size: int, mtime_ns: int) -> Header | None:
        entry = self.entries.get(path)
        if (
            isinstance(entry, _ENTRY)
            and len(entry) == 3
            and type(entry[0]) is int  # a boolean is no size
            and type(entry[1]) is int
            and entry[0] == size
            and entry[1] == mtime_ns
            and isinstance(entry[2], _HEADER)
        ):
            header: Header = entry[2]
            return header
        return None  # not cached, changed since, or an entry of the wrong shape: read again

    def put(self, path: str, size: int, mtime_ns: int, value: Header) -> None:
        self.entries[path] = (size, mtime_ns, value)
        self.dirty = True

    def save(self, live: set[str]) -> None:
        stale = set(self.entries) - live
        for key in stale:
            del self.entries[key]
        if self.path is None or not (self.dirty or stale):
            return
        payload = {"format": CACHE_FORMAT, "entries": self.entries}
        body = json.dumps(payload, separators=(",", ":")).encode()
        # a cache that cannot be written (or has a link in its place) only costs time
        with contextlib.suppress(OSError, LinkRefused):
            atomic_write_bytes(self.path, body, no_links_below=self.path.parent)


def discover(
    scan: Scan,
    cache_file: Path | None,
    *,
    save: bool = True,
    keep: Callable[[str], bool] | None = None,
) -> Discovery:
    """The models of ``scan``; ``save=False`` reads the cache but never writes it (<TAB>);
    ``keep``: the records of only the models whose id it accepts (:func:`.models.build_models`)."""
    found = build_models(scan.folders, _headers(scan, cache_file, save), keep)
    found.stopped.extend(scan.stopped)
    return found


def discover_ids(scan: Scan, cache_file: Path | None) -> list[str]:
    """The id of every model and skipped file of ``scan``, writing no cache (<TAB>)."""
    return model_ids(scan.folders, _headers(scan, cache_file, False))


def _headers(scan: Scan, cache_file: Path | None, save: bool) -> dict[str, Header]:
    """Each GGUF's header (or why it cannot be read), by path: a first shard's for its set."""
    cache = MetaCache(cache_file)
    stats = {path: (size, mtime) for path, size, mtime in scan.inputs}
    metas: dict[str, Header] = {}
    for folder in scan.folders:
        prefix = in_folder(folder.path)
        for name in folder.ggufs:
            parts = split_parts(name)
            if parts is not None and parts[1] != 1:
                continue  # only shard 1 carries what we need
            path = prefix + name
            size, mtime = stats[path]
            cached = cache.get(path, size, mtime)
            if cached is None:
                from .gguf import GgufError, read_gguf_metadata  # mmap, struct: a miss only

                try:
                    cached = read_gguf_metadata(Path(path))
                except GgufError as exc:  # the reader maps every failure to this one
                    cached = str(exc)
                cache.put(path, size, mtime, cached)
            metas[path] = cached
    if save:
        cache.save(set(metas))
    return metas
