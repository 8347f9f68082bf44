"""The largest context that starts and stays within a memory budget, found by bisection.

Pure: the caller injects ``attempt(ctx)``, which starts the server at that context, sends one
request, measures and stops it. The contexts tried are the ones the emitter can write
(multiples of 4096, SPEC §11 ``rounded_ctx``, capped at the trained length), so the answer is
one the generated config reproduces exactly. Memory grows with the context, so one that fits
means every smaller one fits and one that does not means no larger one does.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import field

from ..emit.sizing import FLOOR_CTX, rounded_ctx
from ..immutable import frozen

__all__ = ["MAX_CTX", "Outcome", "Trial", "candidates", "find_context"]

MAX_CTX = 1 << 20
"""Largest context tried for a model that does not state its trained length."""


@frozen(slots=True)
class Trial:
    """One start at ``ctx``: whether it served, what it held, and why not."""

    ctx: int
    started: bool
    gib: float | None = None
    measured_by: str | None = None
    reason: str | None = None  # the failure, as verify words it
    code: str | None = None  # the recognised cause, if any
    memory: bool = True  # a smaller context may help (OOM, or a failure nobody recognised)
    stop: str | None = None  # why the search must end here whatever it showed (the deadline)


@frozen(slots=True)
class Outcome:
    best: Trial | None  # the largest context that started within the budget
    trials: list[Trial] = field(default_factory=list)
    stopped: str | None = None  # why the search ended before it was sure


def candidates(trained: int | None, limit: int = MAX_CTX) -> list[int]:
    """Every context the emitter could write: 4096, 8192, … up to the trained length (a model
    trained on fewer than 4096 tokens has only its own)."""
    top = min(trained, limit) if trained and trained > 0 else limit
    if top < FLOOR_CTX:
        return [top]
    return list(range(FLOOR_CTX, rounded_ctx(top) + 1, FLOOR_CTX))


def _fits(trial: Trial, budget_gib: float) -> bool:
    return trial.started and trial.gib is not None and trial.gib <= budget_gib


async def find_context(
    contexts: list[int],
    attempt: Callable[[int], Awaitable[Trial]],
    budget_gib: float,
    *,
    max_attempts: int,
    time_limit_s: float,
    first: int | None = None,
    clock: Callable[[], float] = time.monotonic,
    out_of_time: str | None = None,
) -> Outcome:
    """Bisect ``contexts`` (ascending) for the largest that fits; ``first`` (the emitter's
    estimate) is tried first, since it is usually close. Only a memory failure (or one nobody
    recognised) narrows the search; any other cause ends it at once, as a trial's ``stop``
    does. ``out_of_time`` words the end when ``time_limit_s`` runs out."""
    trials: list[Trial] = []
    lo, hi = -1, len(contexts)  # contexts[lo] fits (or none known); contexts[hi] does not
    best: Trial | None = None
    deadline = clock() + time_limit_s
    seed = None
    if first is not None:
        seed = max((i for i, c in enumerate(contexts) if c <= first), default=0)
    while hi - lo > 1:
        if len(trials) >= max_attempts:
            return Outcome(best, trials, f"stopped after {max_attempts} attempts")
        if trials and clock() > deadline:
            return Outcome(best, trials, out_of_time or f"stopped after {time_limit_s:g} s")
        mid = seed if seed is not None and not trials else (lo + hi + 1) // 2
        trial = await attempt(contexts[mid])
        trials.append(trial)
        if trial.stop is not None:
            return Outcome(best, trials, trial.stop)
        if _fits(trial, budget_gib):
            lo, best = mid, trial
        elif trial.started and trial.gib is None:
            return Outcome(best, trials, "nothing could measure the server's memory")
        elif not trial.started and not trial.memory:
            return Outcome(best, trials, f"it does not start at {trial.ctx}: {trial.reason}")
        else:
            hi = mid
    return Outcome(best, trials)
