"""``bench MODEL… [--build B…]``: speed per (model, build, device), measured on real starts.

Each (model, build) is started exactly as llama-swap would start it (:func:`.verify.start_entry`:
the emitted ``cmd`` and ``env`` after llama-swap's macro expansion), sent the fixed prompt
``repeat`` times once healthy, then stopped (its whole process group, even when cancelled). A
build other than the one the model resolves to is tried through a pin in a copy of the settings,
as ``verify --repair`` tries one: nothing on disk changes until every run is over, then the
figures are recorded in one atomic write (:func:`.._commit.committing`), so Ctrl-C records
nothing and leaves nothing running.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import anyio

from .._commit import committing
from ..errors import Refused, UsageError
from ..measure.bench import BenchRecord, BenchStore, Run, figures, run_once
from ..measure.diagnose import failure_cause
from ..measure.results import BenchReport, BenchResult
from ..measure.tuned import device_of, key_of
from ..registry.rows import build_id_of
from ..run_requests import BenchRequest
from .facts import find_build
from .measure import HELD_CTRL_C

if TYPE_CHECKING:
    import httpx

    from ..config.models import Settings
    from .measure import MeasureService, _Planned

__all__ = ["BenchService", "OnRun"]

OnRun = Callable[[str, str, int, Run], None]
"""Hears each run: model, build, its number (from 1), its figures."""


class BenchService:
    """``bench`` over the measuring service's planning and starts."""

    def __init__(self, measure: MeasureService, store: BenchStore) -> None:
        self.m = measure
        self.store = store

    def build_of(self, settings: Settings, here: _Planned, ref: str | None) -> str:
        """The build id ``ref`` names for this model: a build id, or a release tag of the
        activated variant of the component the model runs on; None: the one it resolves to."""
        res = getattr(here.planned, "resolution", None)
        row = res.row if res is not None else None
        if ref is None:
            now = build_id_of(row) or (row.id if row is not None else None)
            if now is None:
                raise Refused(f"{here.model.id}: no row serves it; see backendmgr models")
            return now
        if "@" in ref:
            return find_build(self.m.site.builds, ref).id
        component = row.component if row is not None and row.managed else None
        activated = settings.row(component) if component else None
        if component is None or activated is None:
            raise UsageError(
                f"--build {ref}: {here.model.id} does not run on an installed build; "
                "name the build as COMPONENT@VERSION-VARIANT"
            )
        return find_build(self.m.site.builds, f"{component}@{ref}-{activated.variant}").id

    async def bench(
        self,
        req: BenchRequest,
        *,
        record: bool = True,
        on_run: OnRun | None = None,
        on_start: Callable[[str, int], None] | None = None,
    ) -> BenchReport:
        """Each model on each build (the one it resolves to when ``builds`` is empty): the
        median and spread of ``repeat`` runs; recorded per (model, build, device) at the end
        (``record``: a bisect's builds are transient)."""
        model_ids, builds, timeout = req.models, req.builds, req.timeout
        shape = (req.repeat, req.prompt_words, req.tokens)
        settings = await self.m._settings()
        limit = float(timeout if timeout is not None else settings.health_check_timeout)
        pairs = []
        for model_id in dict.fromkeys(model_ids):
            here = await self.m._plan(settings, model_id)
            refs: list[str | None] = list(dict.fromkeys(builds or [])) or [None]
            for build in dict.fromkeys(self.build_of(settings, here, r) for r in refs):
                pairs.append((model_id, build))
        out: list[BenchResult] = []
        records: list[BenchRecord] = []
        for model_id, build in pairs:
            result, done = await self._one(
                settings, model_id, build, limit, shape, on_run, on_start
            )
            out.append(result)
            if done is not None:
                records.append(done)
        warnings: list[str] = []
        async with committing() as held:  # nothing is written until every run is over
            if records and record:
                await anyio.to_thread.run_sync(self.store.put_many, records)
        if held.interrupts:
            warnings.append(HELD_CTRL_C)
        failed = sum(1 for r in out if not r.ok)
        return BenchReport(
            message=f"benched {len(out) - failed} of {len(out)} (model, build) pairs",
            changed=bool(records) and record,
            warnings=warnings,
            results=out,
            failed=failed,
        )

    async def _one(
        self,
        settings: Settings,
        model_id: str,
        build: str,
        limit: float,
        shape: tuple[int, int, int],
        on_run: OnRun | None,
        on_start: Callable[[str, int], None] | None,
    ) -> tuple[BenchResult, BenchRecord | None]:
        from ..emit.plan import Entry

        repeat, words, tokens = shape
        ov = replace(settings.override(model_id), backend=build)
        trial = replace(settings, models={**settings.models, model_id: ov})
        planned = (await self.m._plan(trial, model_id)).planned
        device = device_of(self.m.site)
        base: dict[str, Any] = {
            "model": model_id,
            "build": build,
            "device": device,
            "prompt_words": words,
        }
        if not isinstance(planned, Entry):
            reason = f"skipped: {planned.reason}"
            message = f"{model_id} on {build}: {reason}"
            return BenchResult(**base, ok=False, reason=reason, message=message), None
        kind = planned.resolution.row.kind if planned.resolution.row else "llama"

        async def work(client: httpx.AsyncClient) -> list[Run] | str:
            runs: list[Run] = []
            for i in range(repeat):
                run = await run_once(client, kind, model_id, words, tokens)
                if isinstance(run, str):
                    return run
                runs.append(run)
                if on_run is not None:
                    on_run(model_id, build, i + 1, run)
            return runs

        check = await self.m._check(
            planned,
            limit,
            self.m.site.environ,
            (lambda pid: on_start(model_id, pid)) if on_start else None,
            macros=trial.llama_swap.get("macros"),
            then=work,
        )
        argv = list(planned.argv)
        if not check.ok or not isinstance(check.then, list):
            reason = check.then if isinstance(check.then, str) else (check.reason or "failed")
            said = check.log or reason
            cause = failure_cause(trial, planned.model, planned.resolution, said)
            return BenchResult(
                **base,
                ok=False,
                argv=argv,
                reason=reason,
                cause=cause,
                message=f"{model_id} on {build}: not benched: {reason}",
            ), None
        shown = figures(check.then)
        by = "usage and wall clock" if kind == "vllm" else "llama-server timings"
        model_fp, build_fp, _ = key_of(self.m.site, planned)
        done = BenchRecord(
            **base,
            **shown,
            measured_by=by,
            argv=argv,
            model_fp=model_fp,
            build_fp=build_fp,
            benched_at=datetime.now(UTC).isoformat(timespec="seconds"),
        )
        result = BenchResult(
            **base, **shown, ok=True, measured_by=by, argv=argv, message=line(done)
        )
        return result, done


def line(r: BenchRecord | BenchResult) -> str:
    """``tiny on llama-server@b1-cpu: prompt 812.3 t/s ±4.1 %, generation 41.2 t/s ±2.0 %
    (median of 3)``."""
    pp = (
        f"prompt {r.prompt_per_second:g} t/s ±{r.prompt_spread:g} %"
        if r.prompt_per_second is not None and r.prompt_spread is not None
        else "prompt ?"
    )
    gen = f"generation {r.predicted_per_second:g} t/s ±{r.predicted_spread:g} %"
    return f"{r.model} on {r.build}: {pp}, {gen} (median of {r.runs})"
