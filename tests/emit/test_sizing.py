from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from backendmgr.config.models import ModelOverride, Settings
from backendmgr.discovery.meta import ModelMeta
from backendmgr.discovery.models import DiscoveredModel
from backendmgr.emit.plan import Entry, plan_model
from backendmgr.emit.sizing import (
    GIB,
    gpu_utilisation,
    kv_model,
    llama_est_vram_gb,
    llama_knobs,
    llama_sizing,
    max_ctx_for_budget,
    rounded_ctx,
    vllm_sizing,
)
from tests.support.metas import BIG, SMALL, changed, fields_of


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
        (
            None,
            None,
            32768,
            ("max-model-len 32768 from the default (no VRAM budget to size from)",),
        ),
    ],
)
def test_vllm_max_model_len(
    budget: float | None, pinned: int | None, expected: int, notes: tuple[str, ...]
) -> None:
    sizing = vllm_sizing(BIG, 8, budget, 24, pinned_ctx=pinned)
    assert sizing.max_model_len == expected
    assert tuple(n for n in sizing.notes if "max-model-len" in n or "weights" in n) == notes


def test_trained_cap_beats_the_4096_floor() -> None:
    tiny = changed(SMALL, context_length=2048)
    assert vllm_sizing(tiny, 100, 4, 24).max_model_len == 2048
    assert llama_context(tiny, 100, 4, None)[0] == 2048


def test_no_kv_model_gives_32768_capped() -> None:
    sizing = vllm_sizing(ModelMeta(architecture="x", context_length=16384), 1, 16, 24)
    assert sizing.max_model_len == 16384
    # issue 33: one number, the one written, and its source
    assert sizing.notes[0] == (
        "max-model-len 16384 from the trained context (no KV cost model for this architecture)"
    )
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
    as_bools = changed(swa, sliding_window_pattern=[(i + 1) % 6 != 0 for i in range(12)])
    same = kv_model(as_bools)
    assert same is not None
    assert fields_of(same) == fields_of(kv)


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


@pytest.mark.parametrize(
    ("budget", "pinned", "extra"),
    [
        (16, None, None),
        (16, None, "-np 2 -ub 256"),
        (16, 12345, "--swa-full"),
        (None, None, None),
        (2, None, None),
        (16, None, "-b 64 -kvu"),
    ],
)
def test_llama_sizing_estimates_at_the_context_it_found(
    budget: float | None, pinned: int | None, extra: str | None
) -> None:
    """The plan reads the KV cost and the options once: the estimate is the one at that ctx."""
    swa = changed(BIG, sliding_window=1024, sliding_window_pattern=4)
    for meta in (BIG, SMALL, swa, None):
        sized = llama_sizing(meta, 8, budget, pinned, extra_args=extra, headroom_gb=0.5)
        assert sized.est_vram_gb == llama_est_vram_gb(meta, 8, sized.ctx, extra)
        assert sized.ctx == pinned or pinned is None


def llama_context(*args: Any, **options: Any) -> tuple[int, list[str]]:
    sized = llama_sizing(*args, **options)
    return sized.ctx, sized.notes


def test_llama_context() -> None:
    per_token = kv_model(BIG).slope + 1024 / GIB  # type: ignore[union-attr]
    assert llama_context(BIG, 8, 16, None) == (rounded_ctx((16 - 8 - 0.70) / per_token), [])
    assert llama_context(BIG, 8, 16, None, headroom_gb=1.0) == (
        rounded_ctx((16 - 1 - 8 - 0.70) / per_token),
        [],
    )
    assert llama_context(BIG, 8, 16, 12345) == (12345, [])
    assert llama_context(BIG, 20, 16, None) == (4096, ["weights exceed the VRAM budget"])
    assert llama_context(BIG, 8, None, None) == (
        32768,
        ["ctx 32768 from the default (no VRAM budget to size from)"],
    )
    tiny = changed(SMALL, context_length=2048)
    assert llama_context(tiny, 1, None, None) == (
        2048,
        ["ctx 2048 from the trained context (no VRAM budget to size from)"],
    )


# Measured on an H200 (143 771 MiB) with CUDA llama-server b11434, -ngl 999, f16 KV (issue 11).
CARD_GB = 143771 / 1024
LLAMA_SHAPE = ModelMeta(
    architecture="llama",
    block_count=16,
    embedding_length=2048,
    head_count=16,
    head_count_kv=4,
    key_length=128,
    value_length=128,
    context_length=131072,
)
LLAMA_WEIGHTS = 1.59
LLAMA_TABLE = [(None, 131072, 6.311), (6, 126976, 6.182), (4, 61440, 4.119), (3, 28672, 3.088)]
GEMMA3_SHAPE = ModelMeta(
    architecture="gemma3",
    block_count=30,
    embedding_length=1024,
    head_count=8,
    head_count_kv=16,
    key_length=128,
    value_length=128,
    sliding_window=1024,
    context_length=131072,
)
GEMMA3_WEIGHTS = 0.882
GEMMA3_TABLE = [(None, 131072, 7.582), (4, 61440, 4.859), (3, 36864, 3.898)]
KIB = 1024 / GIB


def _llama_measured(ctx: int) -> float:
    """What the process held: weights, 32 KiB/token of KV, and the residual between the two
    measured points (0.623 GiB at 28 672 tokens, 0.721 GiB at 131 072)."""
    residual = 0.623 + (ctx - 28672) * (0.721 - 0.623) / (131072 - 28672)
    return LLAMA_WEIGHTS + ctx * 32 * KIB + residual


def _gemma3_measured(ctx: int) -> float:
    """5 global layers x 8 KiB x ctx, 25 SWA layers x 8 KiB x 4608 cells, 0.696 + 1 KiB/token."""
    swa = 25 * 8 * KIB * min(ctx, 4608)
    return GEMMA3_WEIGHTS + 5 * 8 * KIB * ctx + swa + 0.696 + ctx * KIB


@pytest.mark.parametrize(
    ("meta", "weights", "table", "measured"),
    [
        (LLAMA_SHAPE, LLAMA_WEIGHTS, LLAMA_TABLE, _llama_measured),
        (GEMMA3_SHAPE, GEMMA3_WEIGHTS, GEMMA3_TABLE, _gemma3_measured),
    ],
    ids=["llama", "gemma3"],
)
def test_llama_sizing_matches_the_measured_tables(
    meta: ModelMeta,
    weights: float,
    table: list[tuple[float | None, int, float]],
    measured: Callable[[int], float],
) -> None:
    headroom = Settings().vram_headroom_gb
    for _, ctx, used in table:
        assert measured(ctx) == pytest.approx(used, abs=0.006)  # the model of the table holds
        est = llama_est_vram_gb(meta, weights, ctx)
        assert 1.00 <= est / used <= 1.05, (ctx, est, used)
    for budget in (None, 8, 6, 5, 4, 3):
        b = budget if budget is not None else CARD_GB
        ctx, notes = llama_context(meta, weights, b, None, headroom_gb=headroom)
        assert notes == []
        assert measured(ctx) <= b - headroom, (budget, ctx, measured(ctx))
        assert llama_est_vram_gb(meta, weights, ctx) <= b - headroom
        if ctx < 131072:  # the next step up would not have fit the estimate
            assert llama_est_vram_gb(meta, weights, ctx + 4096) > b - headroom


def test_the_old_constant_overshot_the_budget() -> None:
    """Sized with 0.5 GiB and no per-token part, budget 3 gave -c 28672 and 3.088 GiB used."""
    ctx, _ = llama_context(LLAMA_SHAPE, LLAMA_WEIGHTS, 3, None)
    assert ctx < 28672 and _llama_measured(ctx) <= 3


@pytest.mark.parametrize(
    ("extra", "cells"),
    [
        (None, 4608),  # pad256(1024 x 4 + 512)
        ("", 4608),
        ("-np 2 --kv-unified", 2560),  # pad256(1024 x 2 + 512)
        ("--parallel=1 -kvu -ub 1000", 2048),  # pad256(2024)
        ("-np 2", 2 * 1536),  # one stream per slot: pad256(1024 + 512) each
        ("-ub 4096 -b 256", 4352),  # the micro-batch is capped at the batch
        ("--swa-full", 32768),
        ("-np -1", 4608),  # auto: llama-server's 4 unified slots
        ("-np 999999999999999999999 -kvu", 32768),  # bounded, then min(ctx, ...)
        ("-np nonsense -ub 'unterminated", 4608),  # a bad quote is read word by word
    ],
)
def test_swa_cells_follow_the_server_knobs(extra: str | None, cells: int) -> None:
    kv = kv_model(GEMMA3_SHAPE)
    assert kv is not None
    knobs = llama_knobs(extra)
    assert knobs.swa_cells(32768, 1024) == cells
    full = 5 * 8 * 1024 * 32768
    assert kv.llama_reserve_gb(32768, knobs) * GIB == pytest.approx(full + 25 * 8 * 1024 * cells)


def test_gemma_270m_swa_cache_as_logged() -> None:
    """llama-server -c 32768 with gemma-3-270m (window 512): "SWA KV cache, size = 2560 cells"."""
    assert llama_knobs(None).swa_cells(32768, 512) == 2560
    assert llama_knobs(None).swa_cells(1000, 512) == 1024  # min(ctx, ...) padded to 256


def test_emitted_entry_follows_extra_args_and_headroom() -> None:
    model = DiscoveredModel(
        id="g3",
        path="/m/g3.gguf",
        format="gguf",
        size_bytes=int(GEMMA3_WEIGHTS * GIB),
        meta=GEMMA3_SHAPE,
    )
    settings = Settings(vram_budget_gb=4)
    entry = plan_model(settings, model, None)
    assert isinstance(entry, Entry)
    assert (
        entry.capabilities["context"]
        == llama_context(GEMMA3_SHAPE, GEMMA3_WEIGHTS, 4, None, headroom_gb=0.1)[0]
    )
    wide = dataclasses.replace(settings, vram_headroom_gb=1.0)
    narrower = plan_model(wide, model, None)
    assert isinstance(narrower, Entry)
    assert narrower.capabilities["context"] < entry.capabilities["context"]
    full = dataclasses.replace(
        settings, models={"g3": ModelOverride(extra_args="--swa-full", ctx=16384)}
    )
    swa_full = plan_model(full, model, None)
    assert isinstance(swa_full, Entry)
    est = swa_full.metadata["est_vram_gb"]
    assert est == llama_est_vram_gb(GEMMA3_SHAPE, GEMMA3_WEIGHTS, 16384, "--swa-full")
    assert est > llama_est_vram_gb(GEMMA3_SHAPE, GEMMA3_WEIGHTS, 16384) + 25 * 8 * KIB * 11000


@settings(max_examples=200, deadline=None)
@given(
    layers=st.integers(min_value=1, max_value=200),
    kv=st.integers(min_value=1, max_value=64),
    k=st.integers(min_value=1, max_value=512),
    v=st.integers(min_value=1, max_value=512),
    cache=st.sampled_from(["f32", "f16", "bf16", "q8_0", "q4_0"]),
    ssm=st.booleans(),
)
def test_a_uniform_model_sums_its_layers_as_the_per_layer_walk_does(
    layers: int, kv: int, k: int, v: int, cache: str, ssm: bool
) -> None:
    """Every layer alike (the shortcut): the same KV model, to the last bit, as the same
    header with its KV heads listed layer by layer (the walk over each layer)."""
    meta = ModelMeta(
        block_count=layers,
        head_count=kv,
        head_count_kv=kv,
        key_length=k,
        value_length=v,
        ssm_inner_size=64 if ssm else None,
        ssm_state_size=16 if ssm else None,
        ssm_conv_kernel=4 if ssm else None,
    )
    listed = changed(meta, head_count_kv=[kv] * layers)
    uniform, walked = kv_model(meta, cache), kv_model(listed, cache)
    assert uniform is not None and walked is not None
    assert fields_of(uniform) == fields_of(walked)
