from __future__ import annotations

import math

import pytest

from backendmgr.discovery.meta import ModelMeta
from backendmgr.emit.sizing import (
    GIB,
    gpu_utilisation,
    kv_model,
    llama_context,
    max_ctx_for_budget,
    rounded_ctx,
    vllm_sizing,
)

BIG = ModelMeta(
    architecture="qwen3",
    block_count=48,
    head_count=32,
    head_count_kv=8,
    key_length=128,
    value_length=128,
    context_length=262144,
)
SMALL = ModelMeta(
    architecture="qwen2",
    block_count=24,
    head_count=14,
    head_count_kv=2,
    key_length=64,
    value_length=64,
    context_length=32768,
)


@pytest.mark.parametrize(
    ("x", "expected"),
    [(0, 4096), (35498, 32768), (61440, 61440), (4095, 4096), (8191.9, 4096), (1e9, 999997440)],
)
def test_rounded_ctx(x: float, expected: int) -> None:
    assert rounded_ctx(x) == expected


def test_kv_slope_per_token() -> None:
    kv = kv_model(BIG)
    assert kv is not None
    assert kv.slope * GIB == 48 * 8 * (128 + 128) * 2
    assert kv.const == 0
    assert max_ctx_for_budget(kv, 6.5) == 35498
    assert max_ctx_for_budget(kv, 0) == 0


@pytest.mark.parametrize(
    ("budget", "pinned", "expected", "notes"),
    [
        (16, None, 32768, ()),
        (4096, None, 262144, ()),  # capped at the trained length
        (16, 200000, 200000, ()),  # pinned: not rounded, not capped
        (4, None, 4096, ("weights exceed the VRAM budget",)),
        (None, None, 32768, ("max-model-len 32768: no VRAM budget",)),
    ],
)
def test_vllm_max_model_len(
    budget: float | None, pinned: int | None, expected: int, notes: tuple[str, ...]
) -> None:
    sizing = vllm_sizing(BIG, 8, budget, 24, pinned_ctx=pinned)
    assert sizing.max_model_len == expected
    assert tuple(n for n in sizing.notes if "max-model-len" in n or "weights" in n) == notes


def test_trained_cap_beats_the_4096_floor() -> None:
    tiny = SMALL.model_copy(update={"context_length": 2048})
    assert vllm_sizing(tiny, 100, 4, 24).max_model_len == 2048
    assert llama_context(tiny, 100, 4, None)[0] == 2048


def test_no_kv_model_gives_32768_capped() -> None:
    sizing = vllm_sizing(ModelMeta(architecture="x", context_length=16384), 1, 16, 24)
    assert sizing.max_model_len == 16384
    assert sizing.notes[0] == "max-model-len 32768: no KV cost model"
    assert sizing.kv_cache_bytes is None


@pytest.mark.parametrize(
    ("footprint_gb", "expected"), [(12, 0.5), (6, 0.25), (0.5, 0.10), (32, 0.95), (12.01, 0.51)]
)
def test_utilisation_rounds_up_and_clamps(footprint_gb: float, expected: float) -> None:
    util = gpu_utilisation(footprint_gb, 24)
    assert util == expected
    if 0.10 < util < 0.95:
        assert util * 24 >= footprint_gb


def test_pinned_utilisation_stands_and_drops_the_kv_pin() -> None:
    sizing = vllm_sizing(BIG, 8, 16, 24, pinned_util=0.99)
    assert sizing.gpu_util == 0.99 and sizing.kv_cache_bytes is None


def test_no_gpu_reading_gives_090() -> None:
    sizing = vllm_sizing(BIG, 8, 16, None)
    assert sizing.gpu_util == 0.90
    assert "no GPU reading: utilisation 0.90" in sizing.notes


def test_footprint_rule_for_a_small_model() -> None:
    """0.5B: the whole 22.8 GiB budget must not be handed to vLLM."""
    sizing = vllm_sizing(SMALL, 0.92, 22.8, 24)
    assert sizing.max_model_len == 32768
    kv = kv_model(SMALL)
    assert kv is not None
    pin_gb = kv.reserve_gb(32768) * 1.10 + 0.25
    assert sizing.kv_cache_bytes == math.ceil(pin_gb * GIB)
    footprint = 0.92 + pin_gb + 1.5
    assert sizing.gpu_util == math.ceil(footprint / 24 * 100) / 100
    assert sizing.gpu_util < 0.2
    assert sizing.est_vram_gb == round(sizing.gpu_util * 24, 2)


def test_without_pin_footprint_is_capped_by_budget() -> None:
    big_weights = vllm_sizing(BIG, 20, 22, 24, user_sets_memory=True)
    assert big_weights.kv_cache_bytes is None
    assert big_weights.gpu_util == math.ceil(22 / 24 * 100) / 100


def test_kv_pin_formula() -> None:
    sizing = vllm_sizing(BIG, 8, 16, 24)
    kv = kv_model(BIG)
    assert kv is not None
    assert sizing.kv_cache_bytes == math.ceil((kv.reserve_gb(32768) * 1.10 + 0.25) * GIB)


def test_sliding_window_layers_cost_a_constant() -> None:
    swa = ModelMeta(
        architecture="gemma3",
        block_count=12,
        head_count=8,
        head_count_kv=4,
        key_length=256,
        value_length=256,
        sliding_window=1024,
        sliding_window_pattern=6,
    )
    kv = kv_model(swa)
    assert kv is not None
    full_layers = 2  # layers 6 and 12
    assert kv.slope * GIB == full_layers * 4 * 512 * 2
    assert kv.const * GIB == 10 * 4 * 512 * 2 * 1024
    as_bools = swa.model_copy(
        update={"sliding_window_pattern": [(i + 1) % 6 != 0 for i in range(12)]}
    )
    assert kv_model(as_bools) == kv


def test_per_layer_kv_heads_and_recurrent_layers() -> None:
    meta = ModelMeta(
        architecture="x",
        block_count=4,
        head_count=8,
        head_count_kv=[8, 0, 4, 0],
        key_length=64,
        value_length=64,
    )
    kv = kv_model(meta)
    assert kv is not None and kv.slope * GIB == (8 + 4) * 128 * 2
    hybrid = ModelMeta(
        architecture="qwen3next",
        block_count=8,
        head_count=16,
        head_count_kv=2,
        key_length=256,
        value_length=256,
        full_attention_interval=4,
        ssm_inner_size=4096,
        ssm_state_size=128,
        ssm_conv_kernel=4,
    )
    kv = kv_model(hybrid)
    assert kv is not None
    assert kv.slope * GIB == 2 * 2 * 512 * 2
    assert kv.const * GIB == 6 * (4096 * 128 + 4096 * 3) * 4


def test_mla_caches_one_latent() -> None:
    mla = ModelMeta(
        architecture="deepseek2",
        block_count=61,
        head_count=128,
        head_count_kv=128,
        key_length=192,
        value_length=128,
        kv_lora_rank=512,
        rope_dimension_count=64,
    )
    kv = kv_model(mla)
    assert kv is not None and kv.slope * GIB == 61 * (512 + 64) * 2


def test_llama_context() -> None:
    assert llama_context(BIG, 8, 16, None) == (
        rounded_ctx((16 - 8 - 0.5) / kv_model(BIG).slope),  # type: ignore[union-attr]
        [],
    )
    assert llama_context(BIG, 8, 16, 12345) == (12345, [])
    assert llama_context(BIG, 20, 16, None) == (4096, ["weights exceed the VRAM budget"])
    assert llama_context(BIG, 8, None, None) == (32768, ["ctx 32768: no VRAM budget"])
