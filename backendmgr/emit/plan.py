"""Per model: which row serves it and the command line it gets (SPEC §12.2 to §12.4).

Pure: settings, a discovered model and the card size in, an :class:`Entry` or a :class:`Skip`
out. The llama-swap document is assembled from these in :mod:`.document`.
"""

from __future__ import annotations

import functools
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import field
from typing import TYPE_CHECKING, Any, Final

from ..catalog.capabilities import Capabilities, CapabilityIndex
from ..config.models import ModelOverride, Settings
from ..discovery.models import POOLING, DiscoveredModel
from ..immutable import frozen
from ..registry.build_ids import build_id_of
from ..registry.resolve import Resolution, resolve, resolve_preferring
from .devices import DevicePlan, plan_devices
from .macros import shell_word
from .sizing import (
    Budget,
    devices_card_gb,
    llama_sizing,
    over_budget,
    vllm_sizing,
)

if TYPE_CHECKING:  # the host's probe (platform, subprocess) is not the plan's to load
    from ..catalog.host import Adapter

__all__ = [
    "HF_NEEDS_VLLM",
    "SPLIT_UNDER_VLLM",
    "Entry",
    "Skip",
    "plan_model",
    "render_token",
]

SPLIT_UNDER_VLLM = (
    "vllm cannot load split gguf shards; merge them with llama-gguf-split --merge or pin a "
    "llama build"
)
HF_NEEDS_VLLM = "safetensors model folder needs a vllm backend; llama.cpp loads gguf only"
VLLM_OWN_FLAGS = (
    "--gpu-memory-utilization",
    "--max-model-len",
    "--kv-cache-memory-bytes",
    "--tokenizer",
    "--tensor-parallel-size",
    "--tool-call-parser",
)
MEMORY_FLAGS = ("--gpu-memory-utilization", "--kv-cache-memory-bytes")
PORT = "${PORT}"  # the one macro the plan writes itself
SHELL_SPACE = " \t\r\n"  # what separates shell words: a U+00A0 is part of one


def _extra_text(text: str | None) -> str:
    """``extra_args`` as typed, or "" when it holds no word. Never stripped: a last space may
    be escaped (``\\ `` is the word " "), and stripping it left a lone backslash that no
    shell-words split reads; every use splits the text, so spaces around it change nothing."""
    return text if text and text.strip(SHELL_SPACE) else ""


@frozen
class Entry:
    """A model's llama-swap entry as planned: its row, command line, metadata and notes."""

    model: DiscoveredModel
    resolution: Resolution
    groups: list[list[str]]
    extra_args: str
    ttl: int
    comment: str
    metadata: dict[str, Any]
    capabilities: dict[str, Any]
    unlisted: bool | None
    passthrough: dict[str, Any]
    notes: tuple[str, ...] = field(default=())
    env: tuple[str, ...] = ()  # llama-swap's env: device variables, then the user's
    tuned: Mapping[str, Any] | None = None  # the measured record it was planned with (measure/)
    budget: Budget | None = None  # what it was sized for: verify compares the measured use

    @property
    def argv(self) -> list[str]:
        extra = shlex.split(self.extra_args) if self.extra_args else []  # most have none
        return [tok for group in self.groups for tok in group] + extra

    @property
    def kind(self) -> str:
        return self.resolution.kind or "llama"


class Skip:
    """A model left out of the config, and why (with the row that would have served it).

    A plain class, immutable by type (``Final``): a dataclass costs every read its
    ``__init__`` compiled and its fields walked (issue 30)."""

    __slots__ = ("id", "notes", "path", "reason", "resolution")

    id: Final[str]
    path: Final[str]
    reason: Final[str]
    resolution: Final[Resolution | None]
    notes: Final[tuple[str, ...]]

    def __init__(
        self,
        id: str,
        path: str,
        reason: str,
        resolution: Resolution | None = None,
        notes: tuple[str, ...] = (),
    ) -> None:
        self.id = id
        self.path = path
        self.reason = reason
        self.resolution = resolution
        self.notes = notes


_PLAIN_WORD = re.compile(r"[\w@%+=:,./-]+", re.ASCII)  # what shlex.quote returns unquoted


def render_token(token: str) -> str:
    """Quote for a POSIX shell and llama-swap: the ``${PORT}`` the plan writes stays a macro,
    a ``${`` anywhere else (a path, a name) is written as a literal (:func:`.macros.shell_word`).
    A word of the characters ``shlex.quote`` leaves alone (most flags, numbers and paths) is
    its own quoting, and holds no ``${``: it is written as it is, without the calls."""
    if token == PORT or _PLAIN_WORD.fullmatch(token):
        return token
    return shell_word(token)


def _flags_in(extra: str) -> set[str]:
    try:
        tokens = shlex.split(extra) if extra else []  # a lexer made for nothing, per model
    except ValueError:
        tokens = extra.split()
    return {t.split("=", 1)[0] for t in tokens if t.startswith("-")}


def _pinned_budget(
    settings: Settings, ov: ModelOverride, card_gb: float | None, pinned_gb: float | None
) -> Budget | None:
    """With a device pin the pinned cards bound the budget: a global ``vram_budget_gb`` set
    for the big card must not size a model for more than the small card it runs on."""
    if ov.vram_target_gb:
        return Budget(ov.vram_target_gb, "vram_target_gb")
    if pinned_gb is None:
        if settings.vram_budget_gb:
            return Budget(settings.vram_budget_gb, "vram_budget_gb")
        return Budget(card_gb, "the GPU's memory") if card_gb else None
    if settings.vram_budget_gb and settings.vram_budget_gb < pinned_gb:
        return Budget(settings.vram_budget_gb, "vram_budget_gb")
    return Budget(pinned_gb, f"device {ov.device}")


def _card(card_gb: float | None) -> Budget | None:
    return Budget(card_gb, "the GPU's memory") if card_gb else None


def _describe(model: DiscoveredModel, res: Resolution, extra: list[str]) -> str:
    who = res.row.id if res.row else (res.exe or "?")
    arch = model.meta.architecture if model.meta and model.meta.architecture else "?"
    parts = [f"{who} ({res.reason})", model.format, arch, f"{model.size_gb:.2f} GiB", *extra]
    return " · ".join(parts)


def _metadata(res: Resolution, model: DiscoveredModel, est: float) -> dict[str, Any]:
    data: dict[str, Any] = {"backend": res.row.id if res.row else "legacy"}
    build = build_id_of(res.row)
    if build:
        data["build"] = build
    data["class"] = model.cls
    data["est_vram_gb"] = est
    return data


_no_override = functools.cache(ModelOverride)
"""The override of the many models with none: one (it is immutable), not a new one made and
checked field by field for each model of each plan."""

ToolParsers = Mapping[str, Sequence[str] | None]
"""Build id → the tool parsers its receipt records (None: not known)."""


def plan_model(
    settings: Settings,
    model: DiscoveredModel,
    card_gb: float | None,
    tool_parsers: ToolParsers | None = None,
    caps: CapabilityIndex | None = None,
    gpus: Sequence[Adapter] = (),
) -> Entry | Skip:
    """``caps``: what each build can do; without it (or for a build never probed) every
    llama-server gets the full flag set, as before capabilities existed. ``gpus``: the host's
    adapters, for a model pinned to a ``device``."""
    ov = settings.models.get(model.id) or _no_override()  # Settings.override, for each model
    index = caps or CapabilityIndex()
    if model.format == "hf":
        res = resolve_preferring(settings, ov, "llm", "vllm")
        if res.kind != "vllm":
            return Skip(model.id, model.path, HF_NEEDS_VLLM, res, res.notes)
        dev = plan_devices(ov, res, index.of(res.exe), gpus)
        return _vllm(settings, model, ov, res, card_gb, tool_parsers or {}, dev)
    res = resolve(settings, ov, "llm", embedding=model.role != "chat")
    dev = plan_devices(ov, res, index.of(res.exe), gpus)
    if res.kind == "vllm":
        if model.shards > 1:
            return Skip(model.id, model.path, SPLIT_UNDER_VLLM, res, res.notes)
        return _vllm(settings, model, ov, res, card_gb, tool_parsers or {}, dev)
    return _llama(settings, model, ov, res, card_gb, index, dev)


def _common(settings: Settings, ov: ModelOverride) -> dict[str, Any]:
    return {"ttl": settings.ttl, "unlisted": ov.unlisted, "passthrough": dict(ov.llama_swap or {})}


def _llama(
    settings: Settings,
    model: DiscoveredModel,
    ov: ModelOverride,
    res: Resolution,
    card_gb: float | None,
    index: CapabilityIndex,
    dev: DevicePlan,
) -> Entry | Skip:
    build = _build_caps(index, res)
    needed = _needed(model)
    if needed is not None and build is not None:
        flags, why = needed
        if build[1].first_listed(flags) is None:
            return Skip(
                model.id, model.path, _lacks(index, res, build[0], flags, why), res, res.notes
            )
    weights = model.size_gb
    pinned = devices_card_gb(dev.memory_gb, tensor_parallel=None) if dev.memory_gb else None
    budget = _pinned_budget(settings, ov, card_gb, pinned)
    sizing = llama_sizing(
        model.meta,
        weights,
        budget.gb if budget else None,
        ov.ctx,
        extra_args=ov.extra_args,
        headroom_gb=settings.vram_headroom_gb,
    )
    ctx = sizing.ctx
    notes = [*dev.notes, *sizing.notes]
    groups = [
        [res.exe or settings.server_exe],
        ["-m", model.path],
        ["--host", "127.0.0.1"],
        ["--port", PORT],
        ["-c", str(ctx)],
        ["-ngl", "999"],
    ]
    caps: dict[str, Any] = {"in": ["text"], "out": ["text"]}
    wanted: list[list[str]] = []
    if model.role == "chat":
        if model.mmproj:
            wanted.append(["--mmproj", model.mmproj])
            caps["in"] = ["text", "image"]
        wanted.append(["--jinja"])
    elif model.role == "embedding":
        wanted.append([_spelling(build, EMBEDDING_FLAGS)])
        pooling = model.meta.pooling_type if model.meta else None
        if pooling in (1, 2, 3):
            wanted.append(["--pooling", POOLING[pooling]])
    else:
        wanted.append([_spelling(build, RERANKING_FLAGS)])
        caps["reranker"] = True
    left_out = [g[0] for g in wanted if build is not None and not build[1].lists(g[0])]
    groups += [g for g in wanted if g[0] not in left_out]
    notes += _flag_notes(build, left_out, _extra_text(ov.extra_args))
    caps["context"] = ctx
    est = sizing.est_vram_gb
    if ov.ctx:  # only a pinned context can be over budget (the card's Budget made then)
        notes += over_budget(ov.ctx, est, [budget, _card(pinned or card_gb)])
    extra = [f"ctx {ctx}", model.role] if model.role != "chat" else [f"ctx {ctx}"]
    extra += [f"device {ov.device}"] if dev.devices else []
    return Entry(
        model=model,
        resolution=res,
        groups=groups,
        extra_args=_extra_text(ov.extra_args),
        comment=_describe(model, res, extra),
        metadata=_metadata(res, model, est),
        capabilities=caps,
        notes=(*res.notes, *notes),
        env=dev.env,
        budget=budget,
        **_common(settings, ov),
    )


EMBEDDING_FLAGS = ("--embedding", "--embeddings")
RERANKING_FLAGS = ("--reranking", "--rerank")


def _build_caps(index: CapabilityIndex, res: Resolution) -> tuple[str, Capabilities] | None:
    """The resolved build's name and probed capabilities, when they are known."""
    caps = index.of(res.exe)
    if caps is None or not caps.known:
        return None
    name = build_id_of(res.row) or (res.row.id if res.row else res.exe or "?")
    return name, caps


def _needed(model: DiscoveredModel) -> tuple[tuple[str, ...], str] | None:
    """The flag a model cannot run without (any one spelling of it), and why."""
    if model.role == "embedding":
        return EMBEDDING_FLAGS, "an embedding model"
    if model.role != "chat":
        return RERANKING_FLAGS, "a reranker model"
    if model.mmproj:
        return ("--mmproj",), "a model with a projector"
    return None


def _lacks(
    index: CapabilityIndex, res: Resolution, name: str, flags: tuple[str, ...], why: str
) -> str:
    """The skip reason: which build lacks the flag, and which installed builds have it."""
    others = [b for b in index.builds_listing(res.kind or "llama", flags) if b != name]
    if not others:
        hint = "no installed build lists it"
    elif len(others) == 1:
        hint = f"pin it to {others[0]}"
    else:
        hint = f"pin it to one of {', '.join(others)}"
    return f"{name} does not list {flags[0]}, which {why} needs; {hint}"


def _spelling(build: tuple[str, Capabilities] | None, flags: tuple[str, ...]) -> str:
    return (build[1].first_listed(flags) if build else None) or flags[0]


def _flag_notes(
    build: tuple[str, Capabilities] | None, left_out: list[str], extra: str
) -> list[str]:
    """Notes for our flags left out, and for flags in ``extra_args`` the build does not list
    (those stay: they are the user's, and only the user knows what follows them)."""
    if build is None:
        return []
    name, caps = build
    notes = [f"{flag} left out: {name} does not list it in --help" for flag in left_out]
    theirs = sorted(f for f in _flags_in(extra) if not caps.lists(f))
    if theirs:
        notes.append(
            f"extra_args {' '.join(theirs)} not listed by {name} --help; "
            "llama-server may refuse to start"
        )
    return notes


def _vllm(
    settings: Settings,
    model: DiscoveredModel,
    ov: ModelOverride,
    res: Resolution,
    card_gb: float | None,
    tool_parsers: ToolParsers,
    dev: DevicePlan,
) -> Entry:
    extra = _extra_text(ov.extra_args)
    theirs = _flags_in(extra)
    # a model on N devices runs tensor parallel over them unless told otherwise
    on_gpus = len(dev.devices) if dev.vendor != "cpu" else 0
    tensor_parallel = ov.vllm_tensor_parallel or on_gpus or None
    dev_notes = list(dev.notes)
    if on_gpus and tensor_parallel and tensor_parallel > on_gpus:
        dev_notes.append(
            f"vllm_tensor_parallel {tensor_parallel} is more than the {on_gpus} GPUs of "
            f"device {ov.device}; vLLM will refuse to start"
        )
    if dev.memory_gb:
        card_gb = devices_card_gb(dev.memory_gb, tensor_parallel=tensor_parallel or 1)
    budget = _pinned_budget(settings, ov, card_gb, card_gb if dev.memory_gb else None)
    sizing = vllm_sizing(
        model.meta,
        model.size_gb,
        budget.gb if budget else None,
        card_gb,
        pinned_ctx=ov.ctx,
        pinned_util=ov.vllm_gpu_util,
        user_sets_memory=bool(theirs & set(MEMORY_FLAGS)),
    )
    groups: list[list[str]] = [
        [res.exe or "vllm"],
        ["serve", model.path],
        ["--host", "127.0.0.1"],
        ["--port", PORT],
        ["--served-model-name", model.id],
    ]
    if model.format == "gguf":
        groups.append(["--quantization", "gguf"])
    ours: list[list[str]] = [
        ["--gpu-memory-utilization", f"{sizing.gpu_util:g}"],
        ["--max-model-len", str(sizing.max_model_len)],
    ]
    if sizing.kv_cache_bytes is not None:
        ours.append(["--kv-cache-memory-bytes", str(sizing.kv_cache_bytes)])
    if ov.vllm_tokenizer:
        ours.append(["--tokenizer", ov.vllm_tokenizer])
    if tensor_parallel and tensor_parallel > 1:
        ours.append(["--tensor-parallel-size", str(tensor_parallel)])
    groups += [g for g in ours if g[0] not in theirs]
    from .tools import against_build, tool_parser  # vLLM's parsers: not loaded by llama plans

    arch = model.meta.architecture if model.meta else ""
    parser, why = tool_parser(arch, model.id, ov.vllm_tool_parser)
    build = build_id_of(res.row) or ""
    parser, lacking = against_build(
        parser, ov.vllm_tool_parser, tool_parsers.get(build), f"vLLM build {build}"
    )
    caps: dict[str, Any] = {"in": ["text"], "out": ["text"], "context": sizing.max_model_len}
    notes = [*dev_notes, *sizing.notes]
    if ov.ctx:
        notes += over_budget(ov.ctx, sizing.need_gb, [budget, _card(card_gb)])
    if "--tool-call-parser" in theirs:
        caps["tools"] = True
    elif parser:
        groups.append(
            (["--enable-auto-tool-choice"] if "--enable-auto-tool-choice" not in theirs else [])
            + ["--tool-call-parser", parser]
        )
        caps["tools"] = True
    if "--tool-call-parser" not in theirs and (lacking or not parser):
        notes.append(lacking or why)
    summary = [f"max-model-len {sizing.max_model_len}", f"util {sizing.gpu_util:g}"]
    summary += [f"device {ov.device}"] if dev.devices else []
    return Entry(
        model=model,
        resolution=res,
        groups=groups,
        extra_args=extra,
        comment=_describe(model, res, summary),
        metadata=_metadata(res, model, sizing.est_vram_gb),
        capabilities=caps,
        notes=(*res.notes, *notes),
        env=dev.env,
        budget=budget,
        **_common(settings, ov),
    )
