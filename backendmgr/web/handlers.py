"""What each API operation does: one function each, over the same Manager method as its CLI
command, answering the same keys as its ``--json``. The docstring is the operation's summary
in the OpenAPI document; the route table (``routes.py``) says how each one is reached."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable
from typing import TYPE_CHECKING, Any

from anyio import to_thread
from starlette.responses import JSONResponse, Response, StreamingResponse

from .. import api_models as am
from .. import requests as rq
from ..errors import NotFound, Refused, UsageError
from ..run_requests import StatusRequest
from .http import Call
from .jobs import Job, OnEvent

if TYPE_CHECKING:
    from ..results import Outcome, Result

# --- components and builds --------------------------------------------------------------


async def catalog(c: Call) -> Any:
    """components, variants here, suggested variant and why"""
    return await c.manager.catalog_info()


async def releases(c: Call) -> Any:
    """recent versions and the variants each ships"""
    given: dict[str, Any] = {"component": c.param("component"), "variant": c.query("variant")}
    given["refresh"] = c.flag("refresh")
    raw = c.request.query_params.get("limit")
    if raw is not None:  # else the request's own default
        try:
            given["limit"] = int(raw)
        except ValueError:
            raise UsageError(f'limit: "{raw[:20]}" is not a whole number') from None
    query = rq.ReleasesQuery(**given)
    return await c.manager.releases(query)


async def list_builds(c: Call) -> Any:
    """installed builds (?component= for one component)"""
    return await to_thread.run_sync(
        c.manager.list_builds, rq.ListRequest(component=c.query("component"))
    )


async def install(c: Call) -> Job:
    """install a build: starts a job and answers its id at once"""
    req = c.body(rq.InstallRequest)
    # an unknown component or variant is the CLI's error now, not a failed job
    manifest = c.manager.manifest(req.component)
    if req.variant is not None and manifest.variant(req.variant) is None:
        from ..catalog.matching import unknown_variant

        raise unknown_variant(manifest, req.variant)

    def run(on_event: OnEvent) -> Awaitable[Outcome]:
        return c.manager.install(req, on_event=on_event)

    return c.jobs.start("install", req.fields(), run)


async def activate(c: Call) -> Any:
    """switch the activated build of a component"""
    return await c.manager.activate(c.body(rq.ActivateRequest))


async def canary(c: Call) -> Job:
    """activate a build for a few models first: verify and bench them on both builds, then
    promote (activate) or roll back; a job whose done carries the comparison (CanaryReport)"""
    from ..events import ProgressEvent
    from ..measure.bench import run_line

    req = c.body(rq.CanaryRequest)
    c.manager.installed_build(req.build)  # a build that is not installed: the CLI's error

    async def run(on_event: OnEvent) -> am.CanaryReport:
        def heard(model: str, build: str, n: int, figures: Any) -> None:
            said = run_line(model, build, n, req.repeat, figures)
            on_event(ProgressEvent("verifying", asset=model, message=said))

        return await c.manager.canary(req, on_run=heard)

    return c.jobs.start("canary", req.fields(), run)


async def uninstall_one(c: Call) -> Any:
    """uninstall one build (?force=true as --force)"""
    request = rq.UninstallRequest(builds=[c.param("build")], force=c.flag("force"))
    return await c.manager.uninstall(request)


async def uninstall(c: Call) -> Any:
    """uninstall several builds: all or none"""
    return await c.manager.uninstall(c.body(rq.UninstallRequest))


async def update(c: Call) -> Job:
    """install and activate the newest release of installed components: a job, as install is"""
    req = c.body(rq.UpdateRequest)
    for component in req.components:
        c.manager.manifest(component)

    def run(on_event: OnEvent) -> Awaitable[Outcome]:
        return c.manager.update(req, on_event=on_event)

    return c.jobs.start("update", req.fields(), run)


async def prune(c: Call) -> Any:
    """remove builds neither activated nor pinned"""
    return await c.manager.prune(c.body(rq.PruneRequest))


async def cache_clean(c: Call) -> Any:
    """remove release listings, partial downloads, leftovers"""
    return await c.manager.cache_clean(c.body(rq.CacheCleanRequest))


# --- jobs -------------------------------------------------------------------------------


async def list_jobs(c: Call) -> Any:
    """install jobs, running and recent"""
    return [j.summary() for j in c.jobs.all()]


def _job(c: Call) -> Job:
    job = c.jobs.get(c.param("job"))
    if job is None:
        raise NotFound(f'no job "{c.param("job")[:40]}"')
    return job


async def get_job(c: Call) -> Any:
    """one job: its state, last event, result or error"""
    return _job(c).summary()


async def job_events(c: Call) -> Response:
    """the job's progress as server-sent events: phase, bytes, total, rate; then done (the
    install result) or failed (the error)"""
    job = _job(c)
    try:
        after = int(c.request.headers.get("last-event-id", "0"))
    except ValueError:
        after = 0

    async def stream() -> AsyncIterator[bytes]:
        yield b"retry: 2000\n\n"
        async for seq, data in job.stream(after):
            text = json.dumps(data, separators=(",", ":"))
            yield f"id: {seq}\nevent: {data['phase']}\ndata: {text}\n\n".encode()

    return StreamingResponse(
        stream(),
        media_type="text/event-stream",
        headers={"cache-control": "no-store", "x-accel-buffering": "no"},
    )


async def cancel_job(c: Call) -> Any:
    """cancel a job: the same clean state as Ctrl-C"""
    job = _job(c)
    if not c.jobs.cancel(job):
        raise Refused(f'job "{job.id}" already finished ({job.state})')
    if job.task is not None:
        import asyncio

        await asyncio.wait([job.task], timeout=10)
    return job.summary()


# --- registry ---------------------------------------------------------------------------


async def backends(c: Call) -> Any:
    """the registry in order (★ is default)"""
    return await to_thread.run_sync(c.manager.backends_info)


async def add_backend(c: Call) -> Any:
    """append a manual row"""
    return await c.manager.add_backend(c.body(rq.AddBackendRequest))


async def remove_backend(c: Call) -> Any:
    """remove a manual row"""
    return await c.manager.remove_backend(rq.RemoveBackendRequest(id=c.param("row")))


async def set_default(c: Call) -> Any:
    """make the row the ★ of its classes"""
    return await c.manager.set_default(c.body(rq.DefaultRequest))


# --- models -----------------------------------------------------------------------------


async def models(c: Call) -> Response:
    """discovered models, the row each resolves to, and why"""
    found, problems = await to_thread.run_sync(c.manager.models_report)
    rows = am.dump(found)
    headers = {"x-backendmgr-warnings": json.dumps(problems)} if problems else None
    return JSONResponse(rows, headers=headers)


async def cmd(c: Call) -> Any:
    """the command line a model gets"""
    return await to_thread.run_sync(c.manager.cmd, rq.CmdRequest(model=c.param("model")))


async def pin(c: Call) -> Any:
    """keep the model on one registry row"""
    return await c.manager.pin(c.body(rq.PinRequest))


async def unpin(c: Call) -> Any:
    """let the model follow the class default"""
    return await c.manager.unpin(c.body(rq.UnpinRequest))


async def set_overrides(c: Call) -> Any:
    """set per-model overrides (KEY: VALUE text)"""
    return await c.manager.set_overrides(c.body(rq.SetRequest))


async def unset_overrides(c: Call) -> Any:
    """clear per-model overrides"""
    return await c.manager.unset_overrides(c.body(rq.UnsetRequest))


# --- generated config, doctor, config ---------------------------------------------------


async def generated(c: Call) -> Any:
    """the generated llama-swap config as it is, and its validity"""
    return await c.manager.generated()


async def swap_status(c: Call) -> Any:
    """whether llama-swap runs, what it has loaded, and whether it holds backendmgr's file"""
    return await c.manager.swap_status(StatusRequest())


async def generate(c: Call) -> Any:
    """regenerate the llama-swap config"""
    return await c.manager.generate(c.body(rq.GenerateRequest))


async def lock(c: Call) -> Any:
    """write backendmgr.lock beside the config file: every build, asset and SHA-256"""
    return await c.manager.lock(rq.LockRequest())


async def sync(c: Call) -> Job:
    """make this machine's builds the lock's: starts a job and answers its id at once"""
    req = c.body(rq.SyncRequest)

    def run(on_event: OnEvent) -> Awaitable[Outcome]:
        return c.manager.sync(req, on_event=on_event)

    return c.jobs.start("sync", req.fields(), run)


async def verify(c: Call) -> Job:
    """start each model's entry, wait for health, send one request, stop it: a job whose
    events are verifying (a model started) and verified (its result); done carries the
    report (VerifyReport)"""
    req = c.body(rq.VerifyRequest)

    async def run(on_event: OnEvent) -> am.VerifyReport:
        return await c.manager.verify(req, on_event=on_event)

    return c.jobs.start("verify", req.fields(), run, message=_verify_message)


def _verify_message(report: Result) -> str:
    assert isinstance(report, am.VerifyReport)
    total = len(report.results)
    if not report.failed:
        return f"{total} model(s) verified: all ok"
    unchecked = f", {len(report.unchecked)} not checked" if report.unchecked else ""
    return f"{total} model(s) verified: {report.failed} failed{unchecked}"


async def doctor(c: Call) -> Any:
    """registry vs disk, stale pins, leftovers"""
    return await c.manager.doctor(rq.DoctorRequest())


async def doctor_fix(c: Call) -> Any:
    """doctor; with fix, repair what can be repaired"""
    return await c.manager.doctor(c.body(rq.DoctorRequest))


async def which(c: Call) -> Any:
    """the executable that would run, and why"""
    return await to_thread.run_sync(c.manager.which, rq.WhichRequest(target=c.param("target")))


async def config(c: Call) -> Any:
    """where the files are; the effective settings"""
    return await to_thread.run_sync(c.manager.config_info)
