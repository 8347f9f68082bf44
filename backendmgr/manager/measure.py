"""``verify --repair`` and ``tune``: evidence from real starts, turned into pins and contexts.

A plain service over its collaborators (the models' planning, verify, pin and regenerate, the
GPU probe's site and the one store of measured contexts), wired in :mod:`.services`. Nothing changes
until a search is over: a repair is one pin (the existing atomic pin path, which regenerates),
a tune is one record in the data home and a regeneration. Each start goes through
:func:`.verify.start_entry`, which stops the server's whole process group even when cancelled,
so Ctrl-C leaves no process and no change.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import anyio

from .._commit import committing
from ..errors import InvalidInput, Refused, unknown
from ..immutable import frozen
from ..measure.diagnose import failure_cause, repair_order
from ..measure.memory import group_memory
from ..measure.reasons import FailureCause, cause_text, classify
from ..measure.results import (
    Attempt,
    RepairReport,
    RepairResult,
    TuneReport,
    TuneResult,
    TuneTrial,
)
from ..measure.tune import Trial, candidates, find_context
from ..measure.tuned import TunedRecord, TunedStore, device_of, key_of
from ..requests import VerifyRequest
from ..run_requests import RepairRequest, TuneRequest

if TYPE_CHECKING:
    from ..api_models import PinResult, VerifyReport, VerifyResult
    from ..config.models import Settings
    from ..discovery.models import DiscoveredModel
    from ..emit.plan import Entry
    from ..serve_check import CheckResult
    from .models import Plan
    from .probe import Site

__all__ = ["MeasureService", "OnAttempt", "OnTrial"]

OnAttempt = Callable[[str, Attempt], None]
"""Hears each build a repair tries: model, attempt."""
OnTrial = Callable[[str, TuneTrial], None]
"""Hears each context a tune tries: model, trial."""

HELD_CTRL_C = "Ctrl-C came while the result was being recorded: it was recorded whole"


@frozen
class _Planned:
    settings: Settings
    model: DiscoveredModel
    planned: Any  # Entry or Skip


class MeasureService:
    """``repair`` and ``tune`` over injected collaborators (tests and the web can swap them)."""

    def __init__(
        self,
        *,
        site: Site,
        tuned: TunedStore,
        settings: Callable[[], Awaitable[Settings]],
        pipeline: Callable[[Settings, str | None], Plan],  # Models.pipeline: settings, only
        verify: Callable[..., Awaitable[VerifyReport]],
        pin: Callable[[str, str], Awaitable[PinResult]],
        regenerate: Callable[[], Awaitable[list[str]]],
        check: Callable[..., Awaitable[CheckResult]] | None = None,
    ) -> None:
        from .verify import start_entry

        self.site = site
        self._settings = settings
        self._pipeline = pipeline
        self._verify = verify
        self._pin = pin
        self._regenerate = regenerate
        self._check = check or start_entry
        self.tuned = tuned

    # --- planning ------------------------------------------------------------------------

    async def _plan(self, settings: Settings, model_id: str) -> _Planned:
        """The model planned alone (its plan is the one a whole run gives it); every model is
        planned only to name the ids when none is called ``model_id``."""
        plan = await anyio.to_thread.run_sync(self._pipeline, settings, model_id)
        for model, planned in zip(plan.found.models, plan.plans, strict=True):
            if model.id == model_id:
                return _Planned(settings, model, planned)
        plan = await anyio.to_thread.run_sync(self._pipeline, settings, None)
        raise unknown(
            f'no model "{model_id}" was discovered',
            model_id,
            plan.ids(),
            hint='see "backendmgr models"',
        )

    async def _start(
        self,
        settings: Settings,
        entry: Entry,
        timeout: float,
        on_start: Callable[[str, int], None] | None,
    ) -> CheckResult:
        model_id = entry.model.id
        return await self._check(
            entry,
            timeout,
            self.site.environ,
            (lambda pid: on_start(model_id, pid)) if on_start else None,
            measure=group_memory,
            macros=settings.llama_swap.get("macros"),  # issue 28: as llama-swap expands it
        )

    # --- verify --repair -----------------------------------------------------------------

    async def repair(
        self,
        req: RepairRequest,
        *,
        on_result: Callable[[VerifyResult], None] | None = None,
        on_attempt: OnAttempt | None = None,
        on_start: Callable[[str, int], None] | None = None,
    ) -> tuple[list[VerifyResult], RepairReport]:
        """Verify; for each model that fails, try the other builds whose kind serves it (the
        activated build, then those this host can use, newest first: :func:`repair_order`)
        and pin it to the first that passes. A model that passes is never touched."""
        dry_run, timeout = req.dry_run, req.timeout
        request = VerifyRequest(models=req.models, timeout=timeout, keep_going=True)
        results = (await self._verify(request, on_result, on_start)).results
        settings = await self._settings()
        limit = float(timeout if timeout is not None else settings.health_check_timeout)
        repaired: list[RepairResult] = []
        for result in results:
            if result.ok:
                continue
            first = Attempt(
                backend=result.backend,
                ok=False,
                reason=result.reason,
                cause=result.cause,
                why="the row it runs on now",
            )
            repaired.append(
                await self._repair_one(
                    settings, result.id, first, dry_run, limit, on_attempt, on_start
                )
            )
        fixed = [r for r in repaired if r.ok]
        verb = "would pin" if dry_run else "pinned"
        message = (
            f"{verb} {len(fixed)} of {len(repaired)} failing models"
            if repaired
            else "every model verified; nothing to repair"
        )
        report = RepairReport(
            message=message,
            changed=bool(fixed) and not dry_run,
            dry_run=dry_run,
            results=repaired,
            failed=len(repaired) - len(fixed),
        )
        return results, report

    async def _repair_one(
        self,
        settings: Settings,
        model_id: str,
        first: Attempt,
        dry_run: bool,
        limit: float,
        on_attempt: OnAttempt | None,
        on_start: Callable[[str, int], None] | None,
    ) -> RepairResult:
        from ..emit.plan import Entry

        here = await self._plan(settings, model_id)
        res = here.planned.resolution
        tried = [first]
        if res is None:
            return RepairResult(id=model_id, ok=False, tried=tried, message="no row serves it")
        for row, why in repair_order(settings, here.model, res.row, self.site.host, res.cls):
            ov = replace(settings.override(model_id), backend=row.id)
            trial = replace(settings, models={**settings.models, model_id: ov})
            planned = (await self._plan(trial, model_id)).planned
            if not isinstance(planned, Entry):
                reason = f"skipped: {planned.reason}"
                attempt = Attempt(backend=row.id, ok=False, reason=reason, why=why)
            else:
                check = await self._start(trial, planned, limit, on_start)
                said = check.log or check.reason
                cause = failure_cause(trial, planned.model, planned.resolution, said)
                attempt = Attempt(
                    backend=row.id, ok=check.ok, reason=check.reason, cause=cause, why=why
                )
            tried.append(attempt)
            if on_attempt is not None:
                on_attempt(model_id, attempt)
            if attempt.ok:
                if not dry_run:
                    await self._pin(model_id, row.id)
                verb = "would pin it to" if dry_run else "pinned to"
                failed = ", ".join(str(a.backend) for a in tried if not a.ok)
                return RepairResult(
                    id=model_id,
                    ok=True,
                    pinned=row.id,
                    why=why,
                    tried=tried,
                    message=f"{model_id}: {verb} {row.id} (failed on {failed}): {why}",
                )
        return RepairResult(
            id=model_id,
            ok=False,
            tried=tried,
            message=f"{model_id}: no installed build serves it ({len(tried)} tried)",
        )

    # --- tune ----------------------------------------------------------------------------

    async def tune(
        self,
        req: TuneRequest,
        *,
        on_trial: OnTrial | None = None,
        on_start: Callable[[str, int], None] | None = None,
    ) -> TuneReport:
        """The largest context (as the emitter rounds it, capped at the trained length) that
        starts on the resolved build and stays within the budget, recorded per (model, build,
        device); then the llama-swap config is regenerated with it. ``deadline`` bounds the
        whole run, starts included. The record is the last step, after a last check for a
        cancellation, and a Ctrl-C during it waits for it (:func:`.._commit.committing`): a
        cancelled tune records nothing, a reported one recorded everything."""
        budget_gb, max_attempts, timeout = req.budget_gb, req.max_attempts, req.timeout
        deadline = req.deadline
        settings = await self._settings()
        limit = float(timeout if timeout is not None else settings.health_check_timeout)
        end = time.monotonic() + deadline
        chosen = [await self._plan(settings, m) for m in dict.fromkeys(req.models)]
        out: list[TuneResult] = []
        records: list[TunedRecord] = []
        for here in chosen:
            result, record = await self._tune_one(
                here, budget_gb, max_attempts, limit, (end, deadline), on_trial, on_start
            )
            out.append(result)
            if record is not None:
                records.append(record)
        warnings: list[str] = []
        async with committing() as held:  # nothing is written until every search is over
            if records:
                await anyio.to_thread.run_sync(self.tuned.put_many, records)
                warnings = await self._regenerate() if req.generate else []
        if held.interrupts:
            warnings.append(HELD_CTRL_C)
        failed = sum(1 for r in out if not r.ok)
        return TuneReport(
            message=f"tuned {len(out) - failed} of {len(out)} models",
            changed=bool(records),
            warnings=warnings,
            results=out,
            failed=failed,
        )

    def _budget(self, settings: Settings, model_id: str, given: float | None) -> float:
        ov = settings.override(model_id)
        budget = given or ov.vram_target_gb or settings.vram_budget_gb or self.site.card_gb
        if budget is None:
            raise InvalidInput(
                "no memory budget: give --budget GiB (no GPU reading and no vram_budget_gb)"
            )
        return float(budget)

    async def _tune_one(
        self,
        here: _Planned,
        given: float | None,
        max_attempts: int,
        limit: float,
        deadline: tuple[float, float],
        on_trial: OnTrial | None,
        on_start: Callable[[str, int], None] | None,
    ) -> tuple[TuneResult, TunedRecord | None]:
        from ..emit.plan import Entry

        model_id = here.model.id
        entry = here.planned
        if not isinstance(entry, Entry):
            raise Refused(f"{model_id} is skipped: {entry.reason}")
        settings = here.settings
        budget = self._budget(settings, model_id, given)
        trained = here.model.meta.context_length if here.model.meta else None
        estimate = int(entry.capabilities.get("context") or 0) or None
        key = key_of(self.site, entry)
        end, total = deadline
        out_of_time = f"stopped at the --deadline of {total:g} s"
        causes: dict[int, FailureCause | None] = {}

        async def attempt(ctx: int) -> Trial:
            ov = replace(settings.override(model_id), ctx=ctx)
            trial = replace(settings, models={**settings.models, model_id: ov})
            planned = (await self._plan(trial, model_id)).planned
            if not isinstance(planned, Entry):
                return Trial(ctx, False, reason=f"skipped: {planned.reason}", memory=False)
            left = end - time.monotonic()
            if left <= 0:
                return Trial(ctx, False, reason=out_of_time, memory=False, stop=out_of_time)
            check = await self._start(trial, planned, min(limit, left), on_start)
            gib, by = check.measured if check.measured else (None, None)
            why = check.log or check.reason
            match = None if check.ok else classify(why)
            cause = (
                None
                if check.ok
                else failure_cause(trial, planned.model, planned.resolution, why, "tune")
            )
            if left < limit and match is not None and match.cause.code == "never-healthy":
                # the deadline, not the server, ended this start: no verdict on the server
                result = Trial(ctx, False, reason=out_of_time, memory=False, stop=out_of_time)
            else:
                causes[ctx] = cause
                result = Trial(
                    ctx,
                    check.ok,
                    gib,
                    by,
                    check.reason,
                    match.cause.code if match else None,
                    match is None or match.cause.memory,
                )
            if on_trial is not None:
                on_trial(model_id, _shown(result, budget))
            return result

        outcome = await find_context(
            candidates(trained),
            attempt,
            budget,
            max_attempts=max_attempts,
            time_limit_s=end - time.monotonic(),
            first=estimate,
            out_of_time=out_of_time,
        )
        last = outcome.trials[-1] if outcome.trials else None
        ended = causes.get(last.ctx) if last is not None and not last.memory else None
        best = outcome.best
        backend = entry.resolution.row.id if entry.resolution.row else entry.argv[0]
        device = device_of(self.site)
        trials = [_shown(t, budget) for t in outcome.trials]
        if best is None or best.gib is None:
            why = outcome.stopped or f"no context from {candidates(trained)[0]} fits {budget:g} GiB"
            result = TuneResult(
                id=model_id,
                ok=False,
                ctx=None,
                estimated_ctx=estimate,
                measured_gib=None,
                measured_by=None,
                budget_gib=budget,
                backend=backend,
                device=device,
                trials=trials,
                stopped=outcome.stopped,
                cause=ended,
                message=f"{model_id}: not tuned: {why}" + cause_text(ended),
            )
            return result, None
        record = TunedRecord(
            model=model_id,
            ctx=best.ctx,
            measured_gib=best.gib,
            measured_by=best.measured_by or "?",
            budget_gib=budget,
            build=backend,
            device=device,
            model_fp=key[0],
            build_fp=key[1],
            tuned_at=datetime.now(UTC).isoformat(timespec="seconds"),
            attempts=len(outcome.trials),
        )
        from ..measure.tuned import tuning_text

        said = (  # what it had before, in the words models and the generated file use
            f"{model_id}: ctx {best.ctx} fits ({_gib(best.gib)} GiB measured by "
            f"{record.measured_by}, budget {budget:g} GiB) on {backend}; it had "
            f"{tuning_text(settings, entry)}"
        )
        if outcome.stopped:
            said += f"; {outcome.stopped}{cause_text(ended)}, a larger one may fit"
        if settings.override(model_id).ctx is not None:
            said += "; its ctx is set by hand, which generate keeps (unset ctx to use this)"
        result = TuneResult(
            id=model_id,
            ok=True,
            ctx=best.ctx,
            estimated_ctx=estimate,
            measured_gib=best.gib,
            measured_by=record.measured_by,
            budget_gib=budget,
            backend=backend,
            device=device,
            trials=trials,
            stopped=outcome.stopped,
            cause=ended,
            message=said,
        )
        return result, record


def _gib(value: float) -> str:
    return f"{value:.2f}" if value >= 1 else f"{value:.3f}"


def _shown(trial: Trial, budget: float) -> TuneTrial:
    fits = trial.started and trial.gib is not None and trial.gib <= budget
    return TuneTrial(
        ctx=trial.ctx,
        ok=fits,
        started=trial.started,
        gib=trial.gib,
        reason=trial.reason,
        cause=trial.code,
    )
