"""The bisection, pure: an injected start whose memory grows with the context."""

from __future__ import annotations

import os

import pytest

from backendmgr.measure.memory import group_rss_gib, parse_rocm_pids
from backendmgr.measure.tune import Trial, candidates, find_context


def test_candidates_are_what_the_emitter_writes() -> None:
    assert candidates(16384) == [4096, 8192, 12288, 16384]
    assert candidates(40000) == [4096 * k for k in range(1, 10)]  # 36864, never 40000
    assert candidates(2048) == [2048]  # trained on fewer than 4096: its own length
    assert candidates(None, limit=8192) == [4096, 8192]


def linear(per_token: float, oom_above: int | None = None, base: float = 0.5):  # type: ignore[no-untyped-def]
    tried: list[int] = []

    async def attempt(ctx: int) -> Trial:
        tried.append(ctx)
        if oom_above is not None and ctx > oom_above:
            return Trial(ctx, False, reason="cudaMalloc failed: out of memory", code="oom")
        return Trial(ctx, True, base + per_token * ctx, "test")

    return attempt, tried


@pytest.mark.asyncio
async def test_largest_context_within_the_budget() -> None:
    attempt, tried = linear(1 / 8192)  # 0.5 GiB + 1 GiB per 8192 tokens
    out = await find_context(candidates(131072), attempt, 4.0, max_attempts=10, time_limit_s=60)
    assert out.best is not None and out.best.ctx == 28672  # 0.5 + 3.5 = 4.0
    assert len(tried) <= 6 and out.stopped is None
    # each context is tried at most once, and the answer's neighbour above was refused
    assert len(set(tried)) == len(tried) and 32768 in tried


@pytest.mark.asyncio
async def test_out_of_memory_counts_as_too_big_and_the_estimate_goes_first() -> None:
    attempt, tried = linear(0.0, oom_above=20000)
    out = await find_context(
        candidates(65536), attempt, 100.0, max_attempts=10, time_limit_s=60, first=32768
    )
    assert tried[0] == 32768
    assert out.best is not None and out.best.ctx == 16384


@pytest.mark.asyncio
async def test_bounded_in_attempts_and_time_and_stops_on_a_cause_no_context_cures() -> None:
    attempt, tried = linear(1 / 65536)
    out = await find_context(candidates(1 << 20), attempt, 8.0, max_attempts=2, time_limit_s=60)
    assert len(tried) == 2 and out.stopped == "stopped after 2 attempts"
    ticks = iter(range(100))
    out = await find_context(
        candidates(1 << 20),
        attempt,
        8.0,
        max_attempts=50,
        time_limit_s=1.5,
        clock=lambda: float(next(ticks)),
    )
    assert out.stopped == "stopped after 1.5 s" and len(out.trials) == 2

    async def unknown_arch(ctx: int) -> Trial:
        return Trial(ctx, False, reason="unknown model architecture: 'x'", memory=False)

    out = await find_context(candidates(65536), unknown_arch, 8.0, max_attempts=8, time_limit_s=60)
    assert out.best is None and len(out.trials) == 1
    assert out.stopped is not None and "unknown model architecture" in out.stopped

    fits_then_deadline = iter([Trial(4096 * 8, True, 1.0), Trial(0, False, stop="deadline")])

    async def cut(ctx: int) -> Trial:  # a trial's stop ends the search, best kept
        trial = next(fits_then_deadline)
        return Trial(ctx, trial.started, trial.gib, stop=trial.stop)

    out = await find_context(
        candidates(65536), cut, 8.0, max_attempts=8, time_limit_s=60, out_of_time="late"
    )
    assert out.stopped == "deadline" and len(out.trials) == 2
    assert out.best is not None and out.best is out.trials[0]


@pytest.mark.asyncio
async def test_nothing_fits() -> None:
    attempt, _ = linear(1.0)
    out = await find_context(candidates(65536), attempt, 1.0, max_attempts=8, time_limit_s=60)
    assert out.best is None and out.stopped is None and out.trials[-1].ctx == 4096


def test_resident_memory_of_our_own_group_and_rocm_output() -> None:
    mine = group_rss_gib(os.getpgid(0))
    assert mine is not None and 0.005 < mine < 64
    assert group_rss_gib(2**22 + 12345) is None  # no such group
    text = '{"system": {"PID%d": "python3, 1, 1073741824, 0, 0", "PID1": "x, 0, 99, 0, 0"}}'
    assert parse_rocm_pids(text % os.getpid(), os.getpgid(0)) == 1.0
    assert parse_rocm_pids("garbage", 1) is None
