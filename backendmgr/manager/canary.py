"""``activate BUILD --canary MODEL…``: move a few models first, measure, then promote or roll back.

The canaries get a temporary pin to the new build (marked in ``canary.json`` in the data home,
naming each canary's pin before, so that an interrupted canary can be undone by hand or by the
next canary); ``verify`` runs them as the generated config now says, and ``bench`` measures
each on the current build and on the new one. Every canary healthy and no slower than the
current build beyond the tolerance: the build is activated and the temporary pins dropped
(promoted). Otherwise the pins are put back as they were and the old build stays activated
(rolled back). The pins are put back even when the run is cancelled. Where llama-swap runs, the
canary first waits (bounded) until none of the canaries is starting or stopping in its
``/running``.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from .._commit import undoing
from .._fs import create_exclusive, read_regular
from ..api_models import CanaryReport
from ..errors import Refused, UsageError
from ..immutable import frozen
from ..measure.results import BenchResult
from ..registry.rows import build_id_of
from ..requests import (
    ActivateRequest,
    CanaryRequest,
    InstallRequest,
    PinRequest,
    UnpinRequest,
    VerifyRequest,
)
from ..run_requests import BenchRequest
from ..swap.process import alive, started_at
from ..swap.status import MAX_PID
from .facts import find_build

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from ..config.models import Settings
    from ..install.builds import BuildStore
    from .bench import BenchService, OnRun
    from .generate import Generator
    from .install import Installer
    from .measure import MeasureService
    from .models import Models
    from .registry import Registry
    from .switch import Switches
    from .verify import Verifier

__all__ = ["CANARY_NAME", "Canary", "CanaryReport", "slower_pct"]

CANARY_NAME = "canary.json"
MARK_CAP = 1 << 20
IDLE_WAIT_S = 120.0
IDLE_POLL_S = 1.0
BUSY_STATES = ("starting", "stopping")


def slower_pct(old: float | None, new: float | None) -> float | None:
    """How much slower ``new`` is than ``old``, in percent (negative: faster)."""
    if old is None or new is None or old <= 0:
        return None
    return round((old - new) / old * 100, 1)


async def _wait_idle(home: Path, models: list[str], bound: float) -> None:
    """Until llama-swap (where it runs) starts or stops none of ``models``; at most ``bound``."""
    from ..swap.status import observe, read_state

    state = (await anyio.to_thread.run_sync(read_state, home)).state
    if state is None:  # no llama-swap runs on our record: nothing to wait for
        return
    end = time.monotonic() + bound
    while True:
        seen = await observe(state.url)
        busy = [
            r["model"] for r in seen.running if r["model"] in models and r["state"] in BUSY_STATES
        ]
        if seen.error or not busy:
            return
        if time.monotonic() > end:
            raise Refused(
                f"llama-swap is still switching {', '.join(busy)} after {bound:g} s; "
                "try again when it is idle (nothing was changed)"
            )
        await anyio.sleep(IDLE_POLL_S)


def _same_process(pid: int, started: object) -> bool:
    """Whether the canary that wrote the mark still runs: its pid alive and, where the system
    says when a process started, started then (a pid reused after a crash is not it)."""
    now = started_at(pid)
    return alive(pid) and (now is None or started is None or now == started)


def _left_over(mark: Path) -> str | None:
    """What an earlier canary that never finished (killed, power lost) left pinned, and the
    commands that undo it; None when there is none."""
    try:  # a link, a FIFO or /dev/zero in its place is unreadable, never followed or waited on
        raw = read_regular(mark, MARK_CAP, follow=False)
        if len(raw) > MARK_CAP:
            raise ValueError("too large")
        record = json.loads(raw)
        pins = dict(record["pins_before"])
        build = str(record["build"])
        pid, started = record.get("pid"), record.get("started")
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError):
        return f"{mark} is unreadable; remove it after checking the pins (backendmgr models)"
    if type(pid) is int and 0 < pid <= MAX_PID and _same_process(pid, started):
        return f"a canary of {build} is running (process {pid}); wait until it is done"
    undo = "; ".join(
        f"backendmgr unpin {m}" if prior is None else f"backendmgr pin {m} {prior}"
        for m, prior in pins.items()
    )
    return (
        f"an earlier canary of {build} did not finish and left temporary pins; undo them "
        f"({undo}) and remove {mark}"
    )


def _figures(r: BenchResult) -> dict[str, Any]:
    keys = ("ok", "prompt_per_second", "predicted_per_second", "prompt_spread", "runs")
    return {"build": r.build, **{k: getattr(r, k) for k in keys}, "reason": r.reason}


@frozen
class Canary:
    """``activate BUILD --canary`` and ``update --canary`` over the services they drive."""

    home: Path
    builds: BuildStore
    settings: Callable[[], Awaitable[Settings]]
    models: Models
    measure: MeasureService
    bench: BenchService
    verifier: Verifier
    switches: Switches
    registry: Registry
    generator: Generator
    installer: Installer

    async def run(
        self,
        req: CanaryRequest,
        *,
        idle_wait: float = IDLE_WAIT_S,
        on_run: OnRun | None = None,
    ) -> CanaryReport:
        """Promote the build if every canary passes on it and is no slower beyond the
        tolerance (percent; prompt and generation speed, medians); roll back otherwise."""
        models, tolerance, timeout = req.models, req.tolerance, req.timeout
        new = find_build(self.builds, req.build)
        mark = self.home / CANARY_NAME  # first: a running canary's pins are no user's
        left = await anyio.to_thread.run_sync(_left_over, mark)
        if left is not None:
            raise Refused(left)
        settings = await self.settings()
        component = new.receipt.component
        old = build_id_of(settings.row(component))
        if old is None:
            raise Refused(f"{component} has no activated build to compare with; activate {new.id}")
        if old == new.id:
            raise Refused(f"{new.id} is already the activated build")
        canaries = list(dict.fromkeys(models))
        for model_id in canaries:  # each one exists, and runs on the component's activated build
            here = await self.measure._plan(settings, model_id)
            now = self.bench.build_of(settings, here, None)
            if now != old:
                raise Refused(
                    f"{model_id} runs on {now}, not on the activated {old}: a canary must "
                    "follow the activated build (unpin it first)"
                )
        from .flags import check_switch, followers

        plan = await self.models.plan()  # a promotion must not break a model's flags either
        way_out = f"a canary keeps no such flag; without --canary, activate {new.id} --force"
        check_switch(settings, followers(plan, component), new, force=False, way_out=way_out)
        await _wait_idle(self.home, canaries, idle_wait)
        before = {m: settings.override(m).backend for m in canaries}
        me = os.getpid()  # who runs it, and since when: a later canary tells it from a reused pid
        record: dict[str, Any] = {"build": new.id, "previous": old, "pins_before": before}
        record.update(pid=me, started=started_at(me))
        body = json.dumps(record, indent=1).encode()
        if not await anyio.to_thread.run_sync(create_exclusive, mark, body):  # one at a time
            raise Refused(
                (await anyio.to_thread.run_sync(_left_over, mark))
                or f"another canary claimed {mark} at the same moment; nothing was changed"
            )
        promoted = False
        try:
            for model_id in canaries:
                await self.switches.pin(PinRequest(model=model_id, row=new.id))
            request = VerifyRequest(models=canaries, timeout=timeout, keep_going=True)
            checked = (await self.verifier.report(request, None, None, None)).results
            verified = {r.id: r.ok for r in checked}
            shape = {"repeat": req.repeat, "prompt_words": req.prompt_words, "tokens": req.tokens}
            pairs = BenchRequest(models=canaries, builds=[old, new.id], timeout=timeout, **shape)
            report = await self.bench.bench(pairs, on_run=on_run)
            comparison, good = _compare(canaries, report.results, verified, old, new.id, tolerance)
            if good:
                await self.switches.activate(ActivateRequest(build=new.id))
                promoted = True
        finally:
            async with undoing():  # the temporary pins go, whatever happened (Ctrl-C held)
                for model_id, prior in before.items():
                    if prior is None:
                        await self.registry.unpin(UnpinRequest(model=model_id, generate=False))
                    else:
                        await self.switches.pin(
                            PinRequest(model=model_id, row=prior, generate=False)
                        )
                await self.generator.regenerate()
                mark.unlink(missing_ok=True)
        said = (
            f"promoted {new.id}: every canary passed and is within {tolerance:g} % of {old}"
            if promoted
            else f"rolled back: {old} stays activated ({_why(comparison)})"
        )
        return CanaryReport(
            message=said,
            changed=promoted,
            promoted=promoted,
            build=new.id,
            previous=old,
            tolerance=tolerance,
            models=canaries,
            comparison=comparison,
            verified=verified,
        )

    async def newest(self, models: list[str], component: str | None) -> str | None:
        """``update --canary``: the newest release of the component the canaries run on (or
        the one named), in its activated variant, installed without activating it; its build
        id, or None when the activated build is already the newest."""
        if not models:
            raise UsageError("name at least one canary model")
        if component is not None:
            self.installer.ctx.manifest(component)  # an unknown one: a usage error, near names
        settings = await self.settings()
        for model_id in dict.fromkeys(models):  # each canary is checked before anything installs
            here = await self.measure._plan(settings, model_id)
            row = getattr(here.planned, "resolution", None)
            row = row.row if row is not None else None
            runs_on = row.component if row is not None and row.managed else None
            if runs_on is None:
                raise Refused(
                    f"{model_id} does not run on an installed build; it cannot be a canary"
                )
            if component is not None and runs_on != component:
                raise Refused(f"{model_id} runs on {runs_on}, not on {component}: not its canary")
            component = runs_on
        assert component is not None
        activated = settings.row(component)
        if activated is None or not activated.variant:
            raise Refused(f"{component} has no activated build; install one first")
        probe = await self.installer.install(
            InstallRequest(
                component=component, variant=activated.variant, dry_run=True, refresh=True
            )
        )
        if probe.id == build_id_of(activated):
            return None
        await self.installer.install(
            InstallRequest(
                component=component,
                version=probe.version,
                variant=activated.variant,
                generate=False,
            )
        )
        return probe.id


def _compare(
    canaries: list[str],
    results: list[BenchResult],
    verified: dict[str, bool],
    old: str,
    new: str,
    tolerance: float,
) -> tuple[list[dict[str, Any]], bool]:
    """Per canary: both builds' figures, how much slower the new one is, and the verdict."""
    out = []
    good = True
    for model_id in canaries:
        by = {r.build: r for r in results if r.model == model_id}
        was, now = by.get(old), by.get(new)
        slower = {
            key: slower_pct(getattr(was, key, None), getattr(now, key, None))
            for key in ("prompt_per_second", "predicted_per_second")
        }
        problems = []
        if not verified.get(model_id, False):
            problems.append(f"verify failed on {new}")
        if now is None or not now.ok:
            problems.append(f"bench failed on {new}: {now.reason if now else 'not run'}")
        if was is None or not was.ok:
            problems.append(f"bench failed on {old}: {was.reason if was else 'not run'}")
        for key, pct in slower.items():
            what = "prompt" if key.startswith("prompt") else "generation"
            unshown = getattr(was, key, None) is not None and getattr(now, key, None) is None
            if pct is not None and pct > tolerance:
                problems.append(f"{what} {pct:g} % slower")
            elif unshown and now is not None and now.ok:  # "no slower" cannot be shown
                problems.append(f"{what} speed not reported on {new}")
        good = good and not problems
        out.append(
            {
                "model": model_id,
                "old": _figures(was) if was else None,
                "new": _figures(now) if now else None,
                "slower_pct": slower,
                "ok": not problems,
                "problems": problems,
            }
        )
    return out, good


def _why(comparison: list[dict[str, Any]]) -> str:
    return "; ".join(
        f"{c['model']}: {', '.join(c['problems'])}" for c in comparison if c["problems"]
    )
