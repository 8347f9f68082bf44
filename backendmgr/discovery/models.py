"""What counts as a model, what it is called and what class it is (SPEC §10.1, §10.4, §10.5).

Pure functions over what the walk found; the walk itself lives in :mod:`.walk`.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any, Final, Literal, TypeVar

from .chars import printable, unsafe_char
from .files import in_folder
from .meta import ModelMeta, gguf_kind, meta_from_gguf, meta_from_hf

__all__ = [
    "DiscoveredModel",
    "Discovery",
    "FolderScan",
    "SkippedModel",
    "assign_ids",
    "build_models",
    "hf_qualifies",
    "model_ids",
    "split_parts",
    "unsafe_char",
]

SPLIT = r"^(?P<base>.+)-(?P<i>\d{5})-of-(?P<n>\d{5})\.gguf$"
"""A shard of a split GGUF set (any case): ``name-00001-of-00003.gguf``."""
ENCODERS = frozenset(
    {
        "bert",
        "nomic-bert",
        "nomic-bert-moe",
        "jina-bert-v2",
        "jina-bert-v3",
        "modern-bert",
        "neo-bert",
        "eurobert",
    }
)
NOT_TEXT = frozenset({"flux", "sd1", "sdxl", "sd3", "wan", "whisper"})
POOLING = {0: "none", 1: "mean", 2: "cls", 3: "last", 4: "rank"}

Role = Literal["chat", "embedding", "reranker"]
T = TypeVar("T")


class DiscoveredModel:
    """A model the walk found: its id, file (or folder), kind and what its header says.

    This and the walk's other records are plain classes, immutable by type (``Final``): each
    dataclass costs every read its ``__init__`` compiled and its fields walked (issue 30)."""

    __slots__ = ("cls", "format", "id", "meta", "mmproj", "path", "role", "shards", "size_bytes")

    id: Final[str]
    path: Final[str]
    format: Final[Literal["gguf", "hf"]]
    cls: Final[str]
    role: Final[Role]
    size_bytes: Final[int]
    shards: Final[int]
    mmproj: Final[str | None]
    meta: Final[ModelMeta | None]

    def __init__(
        self,
        *,
        id: str,
        path: str,
        format: Literal["gguf", "hf"],
        cls: str = "llm",
        role: Role = "chat",
        size_bytes: int = 0,
        shards: int = 1,
        mmproj: str | None = None,
        meta: ModelMeta | None = None,
    ) -> None:
        self.id = id
        self.path = path
        self.format = format
        self.cls = cls
        self.role = role
        self.size_bytes = size_bytes
        self.shards = shards
        self.mmproj = mmproj
        self.meta = meta

    @property
    def size_gb(self) -> float:
        return self.size_bytes / float(1 << 30)


class SkippedModel:
    """A file the walk found that is not a model it can serve, and why."""

    __slots__ = ("id", "path", "reason")

    id: Final[str]
    path: Final[str]
    reason: Final[str]

    def __init__(self, *, id: str, path: str, reason: str) -> None:
        self.id = id
        self.path = path
        self.reason = reason


class FolderScan:
    """One folder as the walk saw it: file names with (size, mtime_ns), already sorted."""

    __slots__ = ("config", "ggufs", "path", "safetensors")

    path: Final[str]
    ggufs: Final[dict[str, int]]  # filled by the walk
    safetensors: Final[dict[str, int]]
    config: dict[str, Any] | str | None  # parsed config.json, or its error text

    def __init__(self, path: str) -> None:
        self.path = path
        self.ggufs = {}
        self.safetensors = {}
        self.config = None


class Discovery:
    """The models a walk found and the files it skipped (a plain class, immutable by type: a
    named tuple costs every read its making)."""

    __slots__ = ("models", "skipped", "stopped")

    models: Final[list[DiscoveredModel]]
    skipped: Final[list[SkippedModel]]
    stopped: Final[list[str]]  # where the walk's bounds stopped it: the command's warnings

    def __init__(
        self,
        models: list[DiscoveredModel],
        skipped: list[SkippedModel],
        stopped: list[str] | None = None,
    ) -> None:
        self.models = models
        self.skipped = skipped
        self.stopped = stopped if stopped is not None else []


# Control, format (bidi overrides), surrogate (a file name that is not UTF-8) and line/paragraph
# separator characters: none belongs in a model id, a command line or a YAML comment.


def _refuse_unsafe(
    entry: tuple[str, str, T | None, str | None],
) -> tuple[str, str, T | None, str | None]:
    """A model whose path or id holds a control character is skipped, under a printable id.

    One check for every kind of model (gguf, projector, HF folder), so no name reaches the
    emitter, a command line or a comment that could smuggle a newline into the config.
    """
    base, path = entry[0], entry[1]
    what, bad = ("path", unsafe_char(path))
    if bad is None:
        what, bad = ("name", unsafe_char(base))
    if bad is None:
        return entry
    return (printable(base), path, None, f"{what} holds control character {bad}; rename it")


def split_parts(name: str) -> tuple[str, int, int] | None:
    """The set's name, this shard's number and the count, for a shard of a split GGUF set.
    A name without ``-of-`` (in any case, as the pattern matches it) is none: most are not,
    and then the pattern is never compiled (a read of a folder of plain models)."""
    if "-of-" not in name.lower():
        return None
    m = re.match(SPLIT, name, re.IGNORECASE)
    return (m.group("base"), int(m.group("i")), int(m.group("n"))) if m else None


def hf_qualifies(config: dict[str, Any]) -> bool:
    """Rule 1 of SPEC §10.1: a causal LM, or a multimodal wrapper around one."""
    archs = config.get("architectures")
    if not isinstance(archs, list):
        return False
    for arch in archs:
        if not isinstance(arch, str):
            continue
        if arch.endswith("ForCausalLM"):
            return True
        if arch.endswith("ForConditionalGeneration") and (
            isinstance(config.get("text_config"), dict)
            or (isinstance(config.get("vision_config"), dict) and config["vision_config"])
        ):
            return True
    return False


def _hf_name(folder: str) -> str:
    parts = folder.replace("\\", "/").rstrip("/").split("/")
    if len(parts) >= 3 and parts[-2] == "snapshots" and parts[-3].startswith("models--"):
        owner_repo = parts[-3][len("models--") :]
        _, sep, repo = owner_repo.partition("--")
        return repo if sep else owner_repo
    return parts[-1]


def _parent_name(path: str) -> str:
    parts = path.replace("\\", "/").rstrip("/").split("/")
    return parts[-2] if len(parts) >= 2 else "root"


def assign_ids(bases: list[tuple[str, str]]) -> list[str]:
    """Unique ids in walk order: clashes get ``-<parent>``, then ``-2``, ``-3``…"""
    taken: set[str] = set()
    out = []
    for base, path in bases:
        candidate = base
        if candidate in taken:
            candidate = f"{base}-{_parent_name(path).lower()}"
            n = 2
            while candidate in taken:
                candidate = f"{base}-{_parent_name(path).lower()}-{n}"
                n += 1
        taken.add(candidate)
        out.append(candidate)
    return out


def _gguf_role(meta: ModelMeta) -> Role:
    if meta.pooling_type == 4:
        return "reranker"
    if meta.pooling_type is not None or meta.causal is False or meta.architecture in ENCODERS:
        return "embedding"
    return "chat"


Fields = Callable[[], dict[str, Any]]
"""A model's record fields but its id and path, made only for the models a caller keeps (a
header read into :class:`ModelMeta` costs more than the id)."""
Pending = tuple[str, str, Fields | None, str | None]
"""Base id, path, and either the model's :data:`Fields` or the reason it is skipped."""
_InFolder = tuple[str, str, Callable[[str | None], dict[str, Any]] | None, str | None]
"""A :data:`Pending` whose fields still need the folder's projector."""


def _pending(
    folders: list[FolderScan], gguf_meta: dict[str, dict[str, Any] | str]
) -> list[Pending]:
    """Every candidate of the scanned folders in path order, each a model or a skip."""
    pending: list[Pending] = []
    for folder in folders:
        prefix = in_folder(folder.path)
        projectors: list[str] = []
        entries: list[_InFolder] = []
        sets: dict[str, dict[int, str]] = {}
        for name in folder.ggufs:
            parts = split_parts(name)
            if parts is not None:
                sets.setdefault(parts[0], {})[parts[1]] = name
        for name, size in folder.ggufs.items():
            path = prefix + name
            parts = split_parts(name)
            if unsafe_char(path):  # before it can become a projector or a shard set
                base = (parts[0] if parts else name[: -len(".gguf")]).lower()
                entries.append(_refuse_unsafe((base, path, None, None)))
                continue
            if parts is not None and parts[1] != 1:
                if 1 not in sets.get(parts[0], {}):
                    entries.append(
                        (parts[0].lower(), path, None, "split gguf set without its first shard")
                    )
                continue
            base = (parts[0] if parts else name[: -len(".gguf")]).lower()
            raw = gguf_meta.get(path)
            if isinstance(raw, str) or raw is None:
                entries.append((base, path, None, raw or "metadata not read"))
                continue
            arch, kind = gguf_kind(raw)
            if kind == "mmproj" or name.lower().startswith("mmproj") or arch == "clip":
                projectors.append(path)
                continue
            if not arch:
                entries.append((base, path, None, "no general.architecture"))
                continue
            if arch in NOT_TEXT:
                entries.append((base, path, None, f"not a text model: {arch}"))
                continue
            shard_sizes = size
            shards = 1
            if parts is not None:
                members = sets[parts[0]]
                shards = len(members)
                shard_sizes = sum(folder.ggufs[m] for m in members.values())
                if shards != parts[2]:
                    entries.append(
                        (base, path, None, f"split gguf set has {shards} of {parts[2]} shards")
                    )
                    continue
            entries.append(
                (base, path, functools.partial(_gguf_fields, raw, shard_sizes, shards), None)
            )
        projector = sorted(projectors)[0] if projectors else None
        for base, path, fields, reason in entries:
            made = None if fields is None else functools.partial(fields, projector)
            pending.append((base, path, made, reason))
        hf = _hf_entry(folder)
        if hf is not None:
            pending.append(_refuse_unsafe(hf))
    # a GGUF's path was checked above (its id is a lower-cased part of it: as safe), so each
    # entry has been through the one check once
    pending.sort(key=lambda e: e[1])
    return pending


def _gguf_fields(
    raw: dict[str, Any], size: int, shards: int, projector: str | None
) -> dict[str, Any]:
    meta = meta_from_gguf(raw)
    role = _gguf_role(meta)
    fields = {"format": "gguf", "role": role, "size_bytes": size, "shards": shards, "meta": meta}
    if role == "chat" and projector:
        fields["mmproj"] = projector
    return fields


def build_models(
    folders: list[FolderScan],
    gguf_meta: dict[str, dict[str, Any] | str],
    keep: Callable[[str], bool] | None = None,
) -> Discovery:
    """Turn scanned folders and GGUF headers (or their errors) into models and skip lines;
    ``keep``: only the models whose id it accepts (an id is given among all the others)."""
    pending = _pending(folders, gguf_meta)
    ids = assign_ids([(base, path) for base, path, _, _ in pending])
    models: list[DiscoveredModel] = []
    skipped: list[SkippedModel] = []
    for model_id, (_, path, fields, reason) in zip(ids, pending, strict=True):
        if fields is None:
            skipped.append(SkippedModel(id=model_id, path=path, reason=reason or "unknown"))
        elif keep is None or keep(model_id):
            models.append(DiscoveredModel(id=model_id, path=path, **fields()))
    return Discovery(models, skipped)


def model_ids(folders: list[FolderScan], gguf_meta: dict[str, dict[str, Any] | str]) -> list[str]:
    """The id of every model and skipped file, as :func:`build_models` gives them (<TAB>)."""
    return assign_ids([(base, path) for base, path, _, _ in _pending(folders, gguf_meta)])


def _hf_entry(folder: FolderScan) -> Pending | None:
    if not folder.safetensors or folder.ggufs or folder.config is None:
        return None
    name = _hf_name(folder.path)
    if isinstance(folder.config, str):
        return (name.lower(), folder.path, None, f"config.json: {folder.config}")
    if not hf_qualifies(folder.config):
        return None
    meta = meta_from_hf(folder.config)
    base = name.lower()
    if meta.quant and meta.quant.lower() not in base:
        base = f"{base}-{meta.quant.lower()}"
    size = sum(folder.safetensors.values())
    fields = {"format": "hf", "role": "chat", "size_bytes": size, "meta": meta}
    return (base, folder.path, functools.partial(dict, fields), None)
