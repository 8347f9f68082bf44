"""``verify``: start every emitted command once, send it one request, keep what happened
(in :mod:`.verify_cache`, which ``models`` reads)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import anyio

from ..api_models import VerifyReport, VerifyResult
from ..errors import unknown
from ..events import JobEvent, ProgressEvent, VerifiedEvent
from ..immutable import frozen
from ..requests import VerifyRequest
from .models import Models
from .verify_cache import VerifyCache

if TYPE_CHECKING:
    from collections.abc import Mapping

    from ..config.models import Settings
    from ..emit.plan import Entry
    from ..serve_check import CheckResult, Measure, Then

__all__ = ["Verifier", "expanded_entry", "start_entry"]

ENDPOINT_CHARS = 200

OnResult = Callable[[VerifyResult], None]
OnStart = Callable[[str, int], None]
OnJobEvent = Callable[[JobEvent], None]


def health_path(passthrough: dict[str, Any]) -> str | None:
    """llama-swap's ``checkEndpoint`` when the model sets one (``none``: no health check)."""
    value = passthrough.get("checkEndpoint")
    if not isinstance(value, str) or not value.strip() or len(value) > ENDPOINT_CHARS:
        return "/health"
    if value.strip().lower() == "none":
        return None
    return "/" + value.strip().lstrip("/")


def expanded_entry(
    entry: Entry, port: int, environ: Mapping[str, str], macros: Any = None
) -> tuple[list[str], dict[str, str]]:
    """The argv and environment llama-swap would start ``entry`` with on ``port``: the
    ``cmd`` and ``env`` the document writes for it, expanded by :func:`..emit.expand.expand`
    with the global ``macros`` (the passthrough's) and its own. Raises
    :class:`..emit.expand.ExpandError` where llama-swap would refuse the entry."""
    from ..emit.entries import entry_cmd, entry_env
    from ..emit.expand import ExpandError, expand

    cmd = entry_cmd(entry, {"macros": macros})  # the global macros stay macros, as written
    own = entry.passthrough.get("macros")
    proxy = entry.passthrough.get("proxy")
    if not isinstance(cmd, str):
        raise ExpandError(f"{entry.model.id}.cmd is not a string")
    return expand(
        entry.model.id,
        cmd,
        list(entry_env(entry)),
        port=port,
        environ=environ,
        macros=macros if isinstance(macros, dict) else None,
        model_macros=own if isinstance(own, dict) else None,
        proxy=proxy if isinstance(proxy, str) else None,
    )


async def start_entry(
    entry: Entry,
    timeout: float,
    environ: Mapping[str, str],
    on_start: Callable[[int], None] | None = None,
    measure: Measure | None = None,
    macros: Any = None,
    then: Then | None = None,
) -> CheckResult:
    """Start ``entry`` as llama-swap would (issue 28: its ``cmd`` and ``env`` expanded by
    llama-swap's rules, over ``environ``, its health check) until it answers one request, then
    stop it: what ``verify``, ``--repair`` and ``tune`` do with each start. ``macros`` are the
    passthrough's global ones; ``then`` (``bench``) works on the healthy server before the
    stop."""
    from ..emit.expand import ExpandError
    from ..serve_check import CheckResult, check_command, free_port

    port = free_port()
    try:
        argv, env = expanded_entry(entry, port, environ, macros)
    except ExpandError as exc:
        reason = f"llama-swap would refuse this entry: {exc}"
        return CheckResult(False, reason, None, None, None)
    return await check_command(
        argv,
        role=entry.model.role,
        model_id=entry.model.id,
        health_path=health_path(entry.passthrough),
        timeout=timeout,
        env=env,
        on_start=on_start,
        measure=measure,
        port=port,
        search_path=environ.get("PATH", ""),
        then=then,
    )


@frozen
class Verifier:
    environ: Mapping[str, str]
    on_wait: Callable[[str], None] | None  # hears a start's wait before it waits (issue 20)
    models: Models
    cache: VerifyCache

    async def report(
        self,
        req: VerifyRequest,
        on_result: OnResult | None = None,
        on_start: OnStart | None = None,
        on_event: OnJobEvent | None = None,
    ) -> VerifyReport:
        """Check each named model (all emitted ones when none): one result per model run, how
        many failed, and the models it did not reach.

        Without ``keep_going`` the first failure ends the run; the models after it are
        ``unchecked``, so that a summary can name them (issue 20). ``on_start`` hears each
        child's pid (tests check it is gone afterwards); ``on_event`` (a job's stream) hears a
        ``verifying`` event as each model starts and a :class:`VerifiedEvent` with its result.
        """
        from ..emit.plan import Entry

        plan = await self.models.plan()
        by_id = {m.id: p for m, p in zip(plan.found.models, plan.plans, strict=True)}
        skipped = {s.id: s.reason for s in plan.found.skipped}
        chosen: list[tuple[str, Entry | str]] = []
        for model_id in dict.fromkeys(req.models):
            planned = by_id.get(model_id)
            if planned is not None:
                chosen.append((model_id, planned if isinstance(planned, Entry) else planned.reason))
            elif model_id in skipped:
                chosen.append((model_id, skipped[model_id]))
            else:
                raise unknown(
                    f'no model "{model_id}" was discovered',
                    model_id,
                    list(by_id) + list(skipped),
                    hint='see "backendmgr models"',
                )
        if not req.models:
            chosen = sorted((i, p) for i, p in by_id.items() if isinstance(p, Entry))
        limit = float(
            req.timeout if req.timeout is not None else plan.settings.health_check_timeout
        )
        results: list[VerifyResult] = []
        for model_id, what in chosen:
            if isinstance(what, str):
                result = VerifyResult(
                    id=model_id,
                    ok=False,
                    reason=f"skipped: {what}",
                    ready_s=None,
                    gpu_gib=None,
                    est_vram_gb=None,
                )
            else:
                result = await self._run(plan.settings, what, limit, on_start, on_event)
            results.append(result)
            if on_result is not None:
                on_result(result)
            if on_event is not None:
                on_event(VerifiedEvent(result))
            if not result.ok and not req.keep_going:
                break
        return VerifyReport(
            results=results,
            failed=sum(1 for r in results if not r.ok),
            unchecked=[model_id for model_id, _ in chosen[len(results) :]],
        )

    async def _run(
        self,
        settings: Settings,
        entry: Entry,
        limit: float,
        on_start: OnStart | None,
        on_event: OnJobEvent | None,
    ) -> VerifyResult:
        from ..measure.diagnose import failure_cause

        model_id = entry.model.id

        def started(pid: int) -> None:
            if on_start is not None:
                on_start(model_id, pid)
            if on_event is not None:
                on_event(
                    ProgressEvent("verifying", asset=model_id, message=f"{model_id}: starting")
                )

        if self.on_wait is not None:  # issue 20: a start can take the whole limit
            self.on_wait(f"starting {model_id} until it answers (at most {limit:g} s)…")
        macros = settings.llama_swap.get("macros")
        check = await start_entry(entry, limit, self.environ, started, macros=macros)
        budget, used = entry.budget, check.gpu_gib
        over = budget is not None and used is not None and used > budget.gb
        result = VerifyResult(
            id=model_id,
            ok=check.ok,
            reason=check.reason,
            ready_s=check.ready_s,
            gpu_gib=check.gpu_gib,
            est_vram_gb=entry.metadata.get("est_vram_gb"),
            backend=entry.resolution.row.id if entry.resolution.row else None,
            verified_at=datetime.now(UTC).isoformat(timespec="seconds"),
            device=check.device,  # issue 24: the GPU(s) the build said it loaded onto
            budget_gb=budget.gb if budget else None,
            over_budget=f"more than {budget}" if over else None,  # issue 20
            cause=failure_cause(  # issue 22: the recognised cause of a failure
                settings, entry.model, entry.resolution, check.log or check.reason
            ),
        )
        await anyio.to_thread.run_sync(self.cache.record, entry, result)
        return result
