"""VRAM sizing (SPEC §11): the KV cost model, context windows and vLLM's memory flags.

Pure arithmetic over :class:`ModelMeta`; every figure is GiB. Where vLLM is concerned, the
numbers are deliberately conservative: a window that does not fit is a refused start, while a
window that is a little small is only a smaller context.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..discovery.meta import ModelMeta

__all__ = [
    "GIB",
    "KvModel",
    "VllmSizing",
    "gpu_utilisation",
    "kv_model",
    "llama_context",
    "max_ctx_for_budget",
    "rounded_ctx",
    "vllm_sizing",
]

GIB = float(1 << 30)
VLLM_OVERHEAD_GB = 1.5
LLAMA_OVERHEAD_GB = 0.5
BYTES = {"f32": 4.0, "f16": 2.0, "bf16": 2.0, "q8_0": 1.0625, "q4_0": 0.5625}
DEFAULT_CTX = 32768
FLOOR_CTX = 4096
MAX_LAYERS = 4096


@dataclass(frozen=True, slots=True)
class KvModel:
    slope: float  # GiB per token of context
    const: float  # GiB independent of context (sliding windows, recurrent state)

    def reserve_gb(self, ctx: int) -> float:
        return self.slope * ctx + self.const


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
    slope = const = 0.0
    recurrent_count = 0
    for i in range(layers):
        layer_kv = (
            kv[i] if isinstance(kv, list) and i < len(kv) else (kv if isinstance(kv, int) else 0)
        )
        recurrent = (
            meta.recurrent_layers is not None
            and i < len(meta.recurrent_layers)
            and meta.recurrent_layers[i]
        ) or (meta.recurrent_layers is None and interval > 0 and (i + 1) % interval != 0)
        if recurrent:
            recurrent_count += 1
            continue
        if meta.kv_lora_rank:
            slope += (meta.kv_lora_rank + (meta.rope_dimension_count or 0)) * per
            continue
        if not layer_kv:
            continue
        if isinstance(pattern, list):
            sliding = window > 0 and i < len(pattern) and pattern[i]
        else:
            n = pattern if pattern else 6
            sliding = window > 0 and (i + 1) % n != 0
        if sliding:
            const += layer_kv * (k_swa + v_swa) * per * window
        else:
            slope += layer_kv * ((k or 0) + (v or 0)) * per
    if meta.ssm_inner_size and meta.ssm_state_size:
        inner, state = meta.ssm_inner_size, meta.ssm_state_size
        conv = meta.ssm_conv_kernel or 0
        n = recurrent_count or layers
        const += n * (inner * state + inner * max(0, conv - 1)) * 4
    if slope <= 0 and const <= 0:
        return None
    return KvModel(slope / GIB, const / GIB)


def rounded_ctx(x: float) -> int:
    """Down to a multiple of 4096, never below 4096: 35498 → 32768, 0 → 4096."""
    return max(FLOOR_CTX, int(x // FLOOR_CTX) * FLOOR_CTX)


def max_ctx_for_budget(kv: KvModel, avail_gb: float) -> int:
    if avail_gb <= kv.const or kv.slope <= 0:
        return 0
    return math.floor((avail_gb - kv.const) / kv.slope)


def _cap(ctx: int, meta: ModelMeta | None) -> int:
    trained = meta.context_length if meta else None
    return min(ctx, trained) if trained else ctx


def llama_context(
    meta: ModelMeta | None, weights_gb: float, budget_gb: float | None, pinned: int | None
) -> tuple[int, list[str]]:
    """llama.cpp's ``-c`` (SPEC §11.4)."""
    if pinned:
        return pinned, []
    kv = kv_model(meta)
    if kv is None or budget_gb is None:
        why = "no KV cost model" if kv is None else "no VRAM budget"
        return _cap(DEFAULT_CTX, meta), [f"ctx {DEFAULT_CTX}: {why}"]
    avail = budget_gb - weights_gb - LLAMA_OVERHEAD_GB
    if avail <= kv.const:
        return _cap(FLOOR_CTX, meta), ["weights exceed the VRAM budget"]
    return _cap(rounded_ctx(max_ctx_for_budget(kv, avail)), meta), []


@dataclass(frozen=True, slots=True)
class VllmSizing:
    max_model_len: int
    gpu_util: float
    kv_cache_bytes: int | None
    est_vram_gb: float
    notes: tuple[str, ...]


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
            ctx = DEFAULT_CTX
            notes.append(
                f"max-model-len {DEFAULT_CTX}: "
                + ("no KV cost model" if kv is None else "no VRAM budget")
            )
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
    return VllmSizing(ctx, util, pin_bytes, est, tuple(notes))
