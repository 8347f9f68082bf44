"""VRAM sizing (SPEC §11): the KV cost model, context windows and vLLM's memory flags.

Pure arithmetic over :class:`ModelMeta`; every figure is GiB. Where vLLM is concerned, the
numbers are deliberately conservative: a window that does not fit is a refused start, while a
window that is a little small is only a smaller context.
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

from ..discovery.meta import ModelMeta

if TYPE_CHECKING:
    from ..config.models import Settings
    from .plan import Entry

__all__ = [
    "GIB",
    "Budget",
    "KvModel",
    "LlamaKnobs",
    "LlamaSizing",
    "VllmSizing",
    "ctx_sentence",
    "devices_card_gb",
    "gpu_utilisation",
    "is_over_budget",
    "kv_model",
    "llama_est_vram_gb",
    "llama_footprint_gb",
    "llama_knobs",
    "llama_sizing",
    "max_ctx_for_budget",
    "over_budget",
    "rounded_ctx",
    "tuned_sentence",
    "tuning_text",
    "unsized_note",
    "vllm_sizing",
]

GIB = float(1 << 30)
VLLM_OVERHEAD_GB = 1.5
# llama.cpp, measured (SPEC §11.4; issue 11): CUDA llama-server b11434 on an H200, f16 KV,
# -ngl 999, flash attention at its default. Beyond weights and KV the process held
# 0.596 GiB + 1.0 KiB/token for a llama shape (16 layers, n_embd 2048, vocab 32000) and
# 0.696 GiB + 1.0 KiB/token for a gemma3 shape (30 layers, n_embd 1024, 5 of them global):
# the fixed part is the larger of the two, rounded up (CUDA context, cuBLAS workspace, output
# and graph buffers); the per-token part is the f16 attention mask of the compute graph,
# n_ctx x n_ubatch x 2 bytes (1 KiB per token at the default n_ubatch 512).
LLAMA_FIXED_GB = 0.70
LLAMA_MASK_BYTES = 2  # per context token and per ubatch row
# llama-server's defaults (b11434): 4 slots sharing one unified cache, micro-batch 512
LLAMA_N_SEQ = 4
LLAMA_N_UBATCH = 512
SWA_PAD = 256  # llama-kv-cache-iswa.cpp pads the SWA cache to 256 cells
MAX_KNOB = 1 << 16  # bound on -np / -ub read from extra_args
BYTES = {"f32": 4.0, "f16": 2.0, "bf16": 2.0, "q8_0": 1.0625, "q4_0": 0.5625}
DEFAULT_CTX = 32768
FLOOR_CTX = 4096
MAX_LAYERS = 4096


# Figures made per model on every read are plain classes, immutable by type (``Final``): a
# dataclass or a named tuple costs every start its making (methods compiled, or made by eval)
class KvModel:
    """A model's KV cost, in GiB: per token of context, and independent of it."""

    __slots__ = ("const", "slope", "swa_cell", "window")

    def __init__(self, slope: float, const: float, swa_cell: float = 0.0, window: int = 0) -> None:
        self.slope: Final = slope  # GiB per token of context
        self.const: Final = const  # GiB independent of context (sliding windows, recurrent state)
        self.swa_cell: Final = swa_cell  # GiB per cell of the sliding-window layers together
        self.window: Final = window  # their window; ``const`` charges ``window`` cells (SPEC §11)

    def reserve_gb(self, ctx: int) -> float:
        return self.slope * ctx + self.const

    def llama_reserve_gb(self, ctx: int, knobs: LlamaKnobs) -> float:
        """What llama-server allocates: its SWA cache is larger than one window (§11.4)."""
        other = self.const - self.swa_cell * self.window
        return self.slope * ctx + other + self.swa_cell * knobs.swa_cells(ctx, self.window)


def _pad(n: int, to: int) -> int:
    return -(-n // to) * to


class LlamaKnobs:
    """The llama-server options that change what it allocates, as ``extra_args`` set them."""

    __slots__ = ("n_seq", "n_ubatch", "swa_full", "unified")

    def __init__(
        self,
        n_seq: int = LLAMA_N_SEQ,
        n_ubatch: int = LLAMA_N_UBATCH,
        unified: bool = True,
        swa_full: bool = False,
    ) -> None:
        self.n_seq: Final = n_seq
        self.n_ubatch: Final = n_ubatch
        self.unified: Final = unified
        self.swa_full: Final = swa_full

    def swa_cells(self, ctx: int, window: int) -> int:
        """Cells of the SWA cache, after ``llama_kv_cache_iswa`` in llama.cpp b11434.

        Unified: ``pad256(min(ctx, window x n_seq + n_ubatch))``. One stream per slot: each
        holds ``pad256(min(ctx / n_seq, window + n_ubatch))``. ``--swa-full``: ``ctx``.
        """
        if self.swa_full:
            return ctx
        if self.unified:
            return _pad(min(ctx, window * self.n_seq + self.n_ubatch), SWA_PAD)
        per = max(1, ctx // self.n_seq)
        return self.n_seq * _pad(min(per, window + self.n_ubatch), SWA_PAD)


def _knob(value: str | None) -> int | None:
    try:
        n = int(value) if value is not None else None
    except ValueError:
        return None
    return min(n, MAX_KNOB) if n is not None and n > 0 else None


_DEFAULT_KNOBS = LlamaKnobs()


def llama_knobs(extra_args: str | None) -> LlamaKnobs:
    """Read ``-np``/``--parallel``, ``-ub``/``--ubatch-size``, ``-b``, ``--swa-full`` and
    ``-kvu``/``--kv-unified`` from the user's arguments; llama-server's defaults otherwise.

    An explicit ``-np N`` gives N slots with one cache stream each (llama-server turns on the
    unified cache only for its automatic slot count) unless ``--kv-unified`` is also given.
    """
    if not extra_args:
        return _DEFAULT_KNOBS  # most models: llama-server's own defaults
    try:
        tokens = shlex.split(extra_args)
    except ValueError:
        tokens = extra_args.split()
    values: dict[str, str | None] = {}
    for i, tok in enumerate(tokens[:MAX_KNOB]):
        name, eq, inline = tok.partition("=")
        nxt = tokens[i + 1] if i + 1 < len(tokens) else None
        values[name] = inline if eq else nxt
    n_seq = _knob(values.get("-np", values.get("--parallel")))
    ubatch = _knob(values.get("-ub", values.get("--ubatch-size"))) or LLAMA_N_UBATCH
    batch = _knob(values.get("-b", values.get("--batch-size")))
    if batch is not None:
        ubatch = min(ubatch, batch)  # llama.cpp caps the micro-batch at the batch
    unified = n_seq is None or "-kvu" in values or "--kv-unified" in values
    if "-no-kvu" in values or "--no-kv-unified" in values:
        unified = False
    swa_full = "--swa-full" in values
    return LlamaKnobs(n_seq or LLAMA_N_SEQ, ubatch, unified, swa_full)


def kv_model(meta: ModelMeta | None, cache_type: str = "f16") -> KvModel | None:
    """The KV cache cost of a model, or None when its shape is not known well enough."""
    if meta is None or not meta.block_count or not 0 < meta.block_count <= MAX_LAYERS:
        return None  # a corrupt header can claim billions of layers
    per = BYTES[cache_type]
    layers = meta.block_count
    heads = meta.head_count
    kv = meta.head_count_kv if meta.head_count_kv is not None else heads
    k = meta.key_length or (
        meta.embedding_length // heads if meta.embedding_length and heads else None
    )
    v = meta.value_length or k
    if (kv is None or k is None or v is None) and not meta.kv_lora_rank:
        return None
    k_swa = meta.key_length_swa or k or 0
    v_swa = meta.value_length_swa or v or 0
    window = meta.sliding_window or 0
    pattern = meta.sliding_window_pattern
    interval = meta.full_attention_interval or 0
    slope = const = swa_cell = 0.0
    recurrent_count = 0
    # what every layer reads, looked up once (a read sizes every model); the sums below add
    # the same products in the same order as one layer at a time
    kv_list = kv if isinstance(kv, list) else None
    kv_each = kv if isinstance(kv, int) else 0
    marked = meta.recurrent_layers
    lora_cell = (
        (meta.kv_lora_rank + (meta.rope_dimension_count or 0)) * per if meta.kv_lora_rank else 0
    )
    swa_width, full_width = k_swa + v_swa, (k or 0) + (v or 0)
    flags = pattern if isinstance(pattern, list) else None
    n = pattern if isinstance(pattern, int) and pattern else 6
    each = range(layers)
    uniform = kv_list is None and marked is None and interval <= 0 and not lora_cell
    if uniform and window <= 0 and kv_each:  # every layer full attention, alike (most models)
        term = kv_each * full_width * per
        for _ in each:  # the sum the loop below makes, the same terms in the same order
            slope += term
        each = range(0)
    for i in each:
        layer_kv = kv_list[i] if kv_list is not None and i < len(kv_list) else kv_each
        recurrent = (marked is not None and i < len(marked) and marked[i]) or (
            marked is None and interval > 0 and (i + 1) % interval != 0
        )
        if recurrent:
            recurrent_count += 1
            continue
        if lora_cell:
            slope += lora_cell
            continue
        if not layer_kv:
            continue
        if flags is not None:
            sliding = window > 0 and i < len(flags) and flags[i]
        else:
            sliding = window > 0 and (i + 1) % n != 0
        if sliding:
            swa_cell += layer_kv * swa_width * per
        else:
            slope += layer_kv * full_width * per
    if meta.ssm_inner_size and meta.ssm_state_size:
        inner, state = meta.ssm_inner_size, meta.ssm_state_size
        conv = meta.ssm_conv_kernel or 0
        n = recurrent_count or layers
        const += n * (inner * state + inner * max(0, conv - 1)) * 4
    const += swa_cell * window
    if slope <= 0 and const <= 0:
        return None
    return KvModel(slope / GIB, const / GIB, swa_cell / GIB, window if swa_cell else 0)


def devices_card_gb(memory_gb: Sequence[float], *, tensor_parallel: int | None) -> float:
    """The memory a model pinned to several GPUs can use, as its backend splits it.

    llama.cpp (``tensor_parallel`` None) spreads layers over every visible card in proportion
    to its memory, and each card holds its own copy of the fixed buffers: the sum, less the
    fixed part once per extra card. vLLM's tensor parallelism puts an equal share on each of
    the first ``tensor_parallel`` cards, so the smallest of them sets every share.
    """
    if not memory_gb:
        raise ValueError("no device memory to size for")
    if tensor_parallel is None:
        return sum(memory_gb) - LLAMA_FIXED_GB * (len(memory_gb) - 1)
    used = list(memory_gb[: max(1, tensor_parallel)])
    return min(used) * len(used)


def rounded_ctx(x: float) -> int:
    """Down to a multiple of 4096, never below 4096: 35498 → 32768, 0 → 4096."""
    return max(FLOOR_CTX, int(x // FLOOR_CTX) * FLOOR_CTX)


def max_ctx_for_budget(kv: KvModel, avail_gb: float) -> int:
    if avail_gb <= kv.const or kv.slope <= 0:
        return 0
    return math.floor((avail_gb - kv.const) / kv.slope)


def ctx_sentence(ctx: int, source: str, flag: str = "ctx") -> str:
    """The one sentence that says a model's context and where it comes from (issue 33), the
    same words in ``models``, ``tune``, the page and the generated file: ``ctx 2048 from the
    trained context``. Sources: the trained context, the VRAM budget, tuning, your setting."""
    return f"{flag} {ctx} from {source}"


def tuned_sentence(ctx: object, gib: object, by: object) -> str:
    """The context a tune measured, in :func:`ctx_sentence`'s words."""
    measured = f"{gib:.3g} GiB" if isinstance(gib, int | float) else "the memory"
    return ctx_sentence(int(str(ctx)), f"tuning: {measured} measured ({by})")


def tuning_text(settings: Settings, entry: Entry) -> str:
    """The one sentence on the model's context and its source (issue 33): your setting,
    tuning, the trained context or the VRAM budget; the plan's own note when it has one, so
    ``models``, ``tune``, the page and the generated file say the same."""
    ctx = int(entry.capabilities.get("context") or 0)
    ov = settings.models.get(entry.model.id)  # none: no ctx of yours (and no override made)
    if ov is not None and ov.ctx is not None:
        return ctx_sentence(ctx, f'your setting ("backendmgr unset {entry.model.id} ctx" sizes it)')
    if entry.tuned:
        t = entry.tuned
        return tuned_sentence(ctx, t.get("measured_gib"), t.get("measured_by"))
    said = next(
        (n for n in entry.notes if n.startswith(("ctx ", "max-model-len ")) and " from " in n), None
    )
    if said is not None:
        return said
    meta = getattr(entry.model, "meta", None)
    if meta is not None and meta.context_length == ctx:
        return ctx_sentence(ctx, "the trained context (the VRAM budget allows it; not tuned)")
    return ctx_sentence(ctx, "the VRAM budget (estimated, not tuned)")


def unsized_note(flag: str, ctx: int, *, no_kv: bool) -> str:
    """No budget (or no KV cost model) to size from: the default, or the trained context
    where that is smaller; one number, the one written."""
    why = "no KV cost model for this architecture" if no_kv else "no VRAM budget to size from"
    source = "the default" if ctx == DEFAULT_CTX else "the trained context"
    return ctx_sentence(ctx, f"{source} ({why})", flag)


def _cap(ctx: int, meta: ModelMeta | None) -> int:
    trained = meta.context_length if meta else None
    return min(ctx, trained) if trained else ctx


def llama_footprint_gb(kv: KvModel | None, weights_gb: float, ctx: int, knobs: LlamaKnobs) -> float:
    """Weights + KV as llama-server allocates it + the fixed part + the per-token buffers."""
    kv_gb = kv.llama_reserve_gb(ctx, knobs) if kv else 0.0
    per_token = LLAMA_MASK_BYTES * knobs.n_ubatch / GIB
    return weights_gb + kv_gb + LLAMA_FIXED_GB + per_token * ctx


def llama_est_vram_gb(
    meta: ModelMeta | None, weights_gb: float, ctx: int, extra_args: str | None = None
) -> float:
    """``est_vram_gb`` of a llama entry, rounded up to 0.01 so it stays at or above the use."""
    return _est_gb(kv_model(meta), llama_knobs(extra_args), weights_gb, ctx)


def _est_gb(kv: KvModel | None, knobs: LlamaKnobs, weights_gb: float, ctx: int) -> float:
    fp = llama_footprint_gb(kv, weights_gb, ctx, knobs)
    return math.ceil(fp * 100 - 1e-9) / 100


class LlamaSizing:
    """A llama entry's ``-c``, the notes on how it was found, and its ``est_vram_gb``."""

    __slots__ = ("ctx", "est_vram_gb", "notes")

    def __init__(self, ctx: int, notes: list[str], est_vram_gb: float) -> None:
        self.ctx: Final = ctx
        self.notes: Final = notes
        self.est_vram_gb: Final = est_vram_gb


def llama_sizing(
    meta: ModelMeta | None,
    weights_gb: float,
    budget_gb: float | None,
    pinned: int | None,
    *,
    extra_args: str | None = None,
    headroom_gb: float = 0.0,
) -> LlamaSizing:
    """llama.cpp's ``-c`` (SPEC §11.4): the largest multiple of 4096 whose footprint fits
    ``budget - headroom``, and the estimate at that context (the KV cost and the options
    read once: a read plans every model).

    The SWA cache is charged at its largest (it only shrinks below ``window x n_seq +
    n_ubatch`` tokens), so the solved context is exact or a little small, never over.
    """
    kv, knobs = kv_model(meta), llama_knobs(extra_args)
    ctx, notes = _llama_context(kv, knobs, meta, weights_gb, budget_gb, pinned, headroom_gb)
    return LlamaSizing(ctx, notes, _est_gb(kv, knobs, weights_gb, ctx))


def _llama_context(
    kv: KvModel | None,
    knobs: LlamaKnobs,
    meta: ModelMeta | None,
    weights_gb: float,
    budget_gb: float | None,
    pinned: int | None,
    headroom_gb: float,
) -> tuple[int, list[str]]:
    if pinned:
        return pinned, []
    if kv is None or budget_gb is None:
        ctx = _cap(DEFAULT_CTX, meta)
        return ctx, [unsized_note("ctx", ctx, no_kv=kv is None)]
    avail = budget_gb - headroom_gb - weights_gb - LLAMA_FIXED_GB
    other = kv.const - kv.swa_cell * kv.window
    swa_max = kv.swa_cell * (knobs.swa_cells(1 << 62, kv.window) if not knobs.swa_full else 0)
    slope = kv.slope + LLAMA_MASK_BYTES * knobs.n_ubatch / GIB
    if knobs.swa_full:
        slope += kv.swa_cell
    sized = KvModel(slope, other + swa_max)
    if avail <= sized.const:
        return _cap(FLOOR_CTX, meta), ["weights exceed the VRAM budget"]
    return _cap(rounded_ctx(max_ctx_for_budget(sized, avail)), meta), []


class VllmSizing:
    """A vLLM entry's window, memory flags, estimate and notes."""

    __slots__ = ("est_vram_gb", "gpu_util", "kv_cache_bytes", "max_model_len", "need_gb", "notes")

    def __init__(
        self,
        max_model_len: int,
        gpu_util: float,
        kv_cache_bytes: int | None,
        est_vram_gb: float,
        notes: tuple[str, ...],
        need_gb: float,
    ) -> None:
        self.max_model_len: Final = max_model_len
        self.gpu_util: Final = gpu_util
        self.kv_cache_bytes: Final = kv_cache_bytes
        self.est_vram_gb: Final = est_vram_gb
        self.notes: Final = notes
        self.need_gb: Final = need_gb  # what the window needs, before the utilisation's clamp


class Budget:
    """The memory a model is sized for, and the setting (or card) that says so."""

    __slots__ = ("gb", "source")

    def __init__(self, gb: float, source: str) -> None:
        self.gb: Final = gb
        self.source: Final = source  # "vram_target_gb", "vram_budget_gb", "the GPU's memory", …

    def __str__(self) -> str:
        return f"the {self.gb:g} GiB of {self.source}"


OVER_BUDGET = " GiB estimated, more than "


def over_budget(ctx: int | None, need_gb: float, limits: Sequence[Budget | None]) -> list[str]:
    """A pinned context is kept as set, even where its estimate does not fit: say which
    limit (the budget, then the card) it exceeds, as a note that ``set``, ``models`` and the
    generated file all show."""
    if not ctx:
        return []
    over = next((b for b in limits if b is not None and need_gb > b.gb), None)
    if over is None:
        return []
    return [
        f"ctx {ctx}: {need_gb:.2f}{OVER_BUDGET}{over}; it may not load "
        "(a smaller ctx, or unset ctx to size it to fit)"
    ]


def is_over_budget(note: str) -> bool:
    """Whether a plan note is :func:`over_budget`'s."""
    return note.startswith("ctx ") and OVER_BUDGET in note


def gpu_utilisation(footprint: float, card: float) -> float:
    """footprint / card, rounded up to 2 decimals, clamped to [0.10, 0.95]."""
    raw = math.ceil(footprint / card * 100 - 1e-9) / 100
    return min(0.95, max(0.10, raw))


def vllm_sizing(
    meta: ModelMeta | None,
    weights_gb: float,
    budget_gb: float | None,
    card_gb: float | None,
    *,
    pinned_ctx: int | None = None,
    pinned_util: float | None = None,
    user_sets_memory: bool = False,
) -> VllmSizing:
    """``--max-model-len``, ``--gpu-memory-utilization`` and ``--kv-cache-memory-bytes``."""
    notes: list[str] = []
    kv = kv_model(meta)
    # 11.1 max-model-len
    if pinned_ctx:
        ctx = pinned_ctx
    else:
        avail = (budget_gb - weights_gb - VLLM_OVERHEAD_GB) if budget_gb is not None else None
        if avail is not None and avail <= 0:
            ctx = FLOOR_CTX
            notes.append("weights exceed the VRAM budget")
        elif kv is None or avail is None:
            ctx = _cap(DEFAULT_CTX, meta)
            notes.append(unsized_note("max-model-len", ctx, no_kv=kv is None))
        else:
            ctx = rounded_ctx(max_ctx_for_budget(kv, avail))
        ctx = _cap(ctx, meta)
    # 11.3 the KV pool pin
    pin_gb: float | None = None
    if pinned_util is None and not user_sets_memory and kv is not None:
        pin_gb = kv.reserve_gb(ctx) * 1.10 + 0.25
    # 11.2 utilisation
    if pin_gb is not None:
        footprint = weights_gb + pin_gb + VLLM_OVERHEAD_GB
    else:
        need = weights_gb + (kv.reserve_gb(ctx) if kv else 0.0) + VLLM_OVERHEAD_GB
        cap = budget_gb if budget_gb is not None else need
        footprint = min(cap, need) if kv is not None else cap
    if pinned_util is not None:
        util = pinned_util
    elif card_gb:
        util = gpu_utilisation(footprint, card_gb)
    else:
        util = 0.90
        notes.append("no GPU reading: utilisation 0.90")
    est = round(util * card_gb, 2) if card_gb else round(footprint, 2)
    pin_bytes = math.ceil(pin_gb * GIB) if pin_gb is not None else None
    return VllmSizing(ctx, util, pin_bytes, est, tuple(notes), round(footprint, 2))
