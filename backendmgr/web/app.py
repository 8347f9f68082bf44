"""The HTTP API and the page: each route calls the same async Manager method as its CLI
command and answers with the same keys as its ``--json`` (validated by ``api_models``)."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from .. import api_models as am
from ..errors import InvalidInput, NotFound, Refused
from ..install.events import ProgressEvent
from .jobs import Jobs, error_body, event_json, one_line
from .security import Guard

if TYPE_CHECKING:
    from ..manager import Manager
    from ..results import Outcome

__all__ = ["create_app", "openapi_document"]

MAX_BODY = 64 << 10  # a request body: a few ids and settings, never more
STATIC_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,60}\.[a-z]{1,4}")
_PLAIN = {"cache-control": "no-store", "referrer-policy": "no-referrer"}
LOCKED = (
    "<!doctype html><meta charset=utf-8><title>backendmgr</title>"
    "<p>This page needs the server's secret. Open the address that "
    "<code>backendmgr serve</code> printed (it ends in <code>?token=…</code>).</p>\n"
)

ONWARD = (
    '<!doctype html><meta charset=utf-8><meta http-equiv="refresh" content="0;url=/">'
    '<title>backendmgr</title><p><a href="/">Open backendmgr</a></p>\n'
)


async def _http_error(request: Request, exc: Exception) -> Response:
    """Unknown routes and methods answer JSON like every other error."""
    from starlette.exceptions import HTTPException

    assert isinstance(exc, HTTPException)
    if exc.status_code == 405:
        message = f"{request.method} is not allowed on {one_line(request.url.path[:200])}"
    else:
        message = f"nothing at {one_line(request.url.path[:200])}"
    return JSONResponse(
        {"error": message, "exit": 1}, exc.status_code, headers=dict(exc.headers or {})
    )


# --- request bodies ---------------------------------------------------------------------


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class InstallRequest(_Body):
    component: str = Field(min_length=1, max_length=200)
    version: str | None = Field(default=None, max_length=200)
    variant: str | None = Field(default=None, max_length=100)
    activate: bool = False
    reinstall: bool = False
    require_checksum: bool = False
    smoke: bool = True
    refresh: bool = False
    generate: bool = True


class UninstallRequest(_Body):
    builds: list[str] = Field(min_length=1, max_length=100)
    force: bool = False
    generate: bool = True


class GenerateFlag(_Body):
    generate: bool = True


class AddBackendRequest(_Body):
    id: str = Field(max_length=200)
    kind: str = Field(max_length=100)
    path: str = Field(max_length=4096)
    name: str = Field(default="", max_length=200)
    default: bool = False
    force: bool = False
    generate: bool = True


class PinRequest(_Body):
    row: str = Field(max_length=300)
    generate: bool = True


class SetRequest(_Body):
    values: dict[str, str] = Field(max_length=20)
    generate: bool = True


class UnsetRequest(_Body):
    keys: list[str] = Field(min_length=1, max_length=20)
    generate: bool = True


class GenerateRequest(_Body):
    """No ``output``: the API writes only the configured file (``--output`` stays CLI-only)."""

    force: bool = False
    check: bool = False


class UpdateRequest(_Body):
    components: list[str] = Field(default_factory=list, max_length=100)
    dry_run: bool = False
    generate: bool = True


class SyncRequest(_Body):
    locked: bool = False
    prune: bool = False
    force: bool = False
    dry_run: bool = False


class VerifyRequest(_Body):
    models: list[str] = Field(default_factory=list, max_length=1000)
    timeout: float | None = Field(default=None, gt=0, le=3600)
    keep_going: bool = False


class PruneRequest(_Body):
    component: str | None = Field(default=None, max_length=200)
    keep: int = Field(default=1, ge=0, le=1000)
    dry_run: bool = False
    generate: bool = True


class CacheCleanRequest(_Body):
    dry_run: bool = False


class DoctorRequest(_Body):
    fix: bool = False


# --- plumbing ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Api:
    """One route for the table and the OpenAPI document."""

    method: str
    path: str
    summary: str
    answer: type[BaseModel] | None
    many: bool = False
    body: type[BaseModel] | None = None
    status: int = 200
    query: tuple[tuple[str, str], ...] = ()  # (name, JSON type) of each optional query parameter


Handler = Callable[[Request], Awaitable[Response]]


def _json(data: Any, status: int = 200) -> JSONResponse:
    return JSONResponse(data, status_code=status)


async def _body(request: Request, model: type[_Body]) -> Any:
    """The JSON body as ``model``; too large, not JSON or the wrong shape is a 422 usage error."""
    raw = b""
    async for chunk in request.stream():
        raw += chunk
        if len(raw) > MAX_BODY:
            raise _Usage(f"the request body is larger than {MAX_BODY // 1024} KiB")
    try:
        data = json.loads(raw or b"{}")
    except (ValueError, RecursionError):  # RecursionError: "[[[[…" nested past the stack
        raise _Usage("the request body is not JSON") from None
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "body"
        msg = first["msg"]
        raise _Usage(f"{where}: {msg[:1].lower()}{msg[1:]}") from None  # names keep their case


class _Usage(InvalidInput):
    """A malformed request: exit status 2, like a CLI usage error."""

    exit_code = 2


def _flag(request: Request, name: str) -> bool:
    value = request.query_params.get(name, "false").lower()
    if value not in ("1", "0", "true", "false", "yes", "no", ""):
        raise _Usage(f'{name}: "{value[:50]}" is not true or false')
    return value in ("1", "true", "yes")


def _json_only(request: Request) -> None:
    """A change with a body says it is JSON: a form or ``text/plain`` post (what another
    page can send without asking) is refused before anything reads it."""
    if request.method in ("GET", "HEAD", "OPTIONS"):
        return
    headers = request.headers
    sized = headers.get("content-length", "0").strip() not in ("", "0")
    if not sized and "transfer-encoding" not in headers:
        return
    kind = headers.get("content-type", "").split(";")[0].strip().lower()
    if kind != "application/json":
        raise _Usage(
            f'the request body must be application/json, not "{one_line(kind[:60]) or "none"}"'
        )


def _param(request: Request, name: str) -> str:
    value: str = request.path_params[name]
    return value


def create_app(manager: Manager, guard: Guard) -> Starlette:
    """The Starlette application for one Manager, behind ``guard``."""
    jobs = Jobs()
    table: list[tuple[Api, Handler]] = []

    def api(
        method: str,
        path: str,
        summary: str,
        answer: type[BaseModel] | None = None,
        *,
        many: bool = False,
        body: type[BaseModel] | None = None,
        status: int = 200,
        query: tuple[tuple[str, str], ...] = (),
    ) -> Callable[[Handler], Handler]:
        def add(handler: Handler) -> Handler:
            async def wrapped(request: Request) -> Response:
                try:
                    _json_only(request)
                    return await handler(request)
                except Exception as exc:
                    code, err = error_body(exc)
                    return _json(err, code)

            route = Api(method, path, summary, answer, many, body, status, query)
            table.append((route, wrapped))
            return handler

        return add

    # --- components and builds ----------------------------------------------------------

    @api(
        "GET",
        "/api/catalog",
        "components, variants here, suggested variant and why",
        am.CatalogEntry,
        many=True,
    )
    async def catalog(request: Request) -> Response:
        return _json(am.dump(await manager.catalog_info()))

    @api(
        "GET",
        "/api/releases/{component}",
        "recent versions and the variants each ships",
        am.ReleaseInfo,
        many=True,
        query=(("variant", "string"), ("refresh", "boolean"), ("limit", "integer")),
    )
    async def releases(request: Request) -> Response:
        q = request.query_params
        try:
            limit = int(q.get("limit", "10"))
        except ValueError:
            raise _Usage(f'limit: "{q.get("limit", "")[:20]}" is not a whole number') from None
        if not 1 <= limit <= 100:
            raise _Usage(f"limit: must be 1 to 100, not {limit}")
        rows = await manager.releases(
            _param(request, "component"),
            variant=q.get("variant") or None,
            refresh=_flag(request, "refresh"),
            limit=limit,
        )
        return _json(am.dump(rows))

    @api(
        "GET",
        "/api/builds",
        "installed builds (?component= for one component)",
        am.BuildInfo,
        many=True,
        query=(("component", "string"),),
    )
    async def list_builds(request: Request) -> Response:
        rows = await manager.list_builds(request.query_params.get("component") or None)
        return _json(am.dump(rows))

    @api(
        "POST",
        "/api/builds",
        "install a build: starts a job and answers its id at once",
        am.JobInfo,
        body=InstallRequest,
        status=202,
    )
    async def install(request: Request) -> Response:
        req: InstallRequest = await _body(request, InstallRequest)
        # an unknown component or variant is the CLI's error now, not a failed job
        manifest = manager.manifest(req.component)
        if req.variant is not None and manifest.variant(req.variant) is None:
            from ..catalog.matching import unknown_variant

            raise unknown_variant(manifest, req.variant)

        def run(on_event: Any) -> Awaitable[Outcome]:
            return manager.install(
                req.component,
                req.version,
                variant=req.variant,
                activate=req.activate,
                reinstall=req.reinstall,
                require_checksum=req.require_checksum,
                smoke=req.smoke,
                refresh=req.refresh,
                on_event=on_event,
                generate=req.generate,
            )

        job = jobs.start("install", req.model_dump(), run)
        return _json(job.summary(), 202)

    @api(
        "POST",
        "/api/builds/{build}/activate",
        "switch the activated build of a component",
        am.ActivateResult,
        body=GenerateFlag,
    )
    async def activate(request: Request) -> Response:
        req: GenerateFlag = await _body(request, GenerateFlag)
        outcome = await manager.activate(_param(request, "build"), generate=req.generate)
        return _json(am.dump(outcome))

    @api(
        "DELETE",
        "/api/builds/{build}",
        "uninstall one build (?force=true as --force)",
        am.UninstallResult,
        query=(("force", "boolean"),),
    )
    async def uninstall_one(request: Request) -> Response:
        outcome = await manager.uninstall([_param(request, "build")], force=_flag(request, "force"))
        return _json(am.dump(outcome))

    @api(
        "POST",
        "/api/uninstall",
        "uninstall several builds: all or none",
        am.UninstallResult,
        body=UninstallRequest,
    )
    async def uninstall(request: Request) -> Response:
        req: UninstallRequest = await _body(request, UninstallRequest)
        outcome = await manager.uninstall(req.builds, force=req.force, generate=req.generate)
        return _json(am.dump(outcome))

    @api(
        "POST",
        "/api/update",
        "install and activate the newest release of installed components: a job, as install is",
        am.JobInfo,
        body=UpdateRequest,
        status=202,
    )
    async def update(request: Request) -> Response:
        req: UpdateRequest = await _body(request, UpdateRequest)
        for component in req.components:
            manager.manifest(component)

        def run(on_event: Any) -> Awaitable[Outcome]:
            return manager.update(
                req.components, dry_run=req.dry_run, on_event=on_event, generate=req.generate
            )

        job = jobs.start("update", req.model_dump(), run)
        return _json(job.summary(), 202)

    @api(
        "POST",
        "/api/prune",
        "remove builds neither activated nor pinned",
        am.PruneResult,
        body=PruneRequest,
    )
    async def prune(request: Request) -> Response:
        req: PruneRequest = await _body(request, PruneRequest)
        outcome = await manager.prune(
            req.component, keep=req.keep, dry_run=req.dry_run, generate=req.generate
        )
        return _json(am.dump(outcome))

    @api(
        "POST",
        "/api/cache/clean",
        "remove release listings, partial downloads, leftovers",
        am.CacheCleanResult,
        body=CacheCleanRequest,
    )
    async def cache_clean(request: Request) -> Response:
        req: CacheCleanRequest = await _body(request, CacheCleanRequest)
        outcome = await manager.cache_clean(dry_run=req.dry_run)
        return _json(am.dump(outcome))

    # --- jobs ---------------------------------------------------------------------------

    @api("GET", "/api/jobs", "install jobs, running and recent", am.JobInfo, many=True)
    async def list_jobs(request: Request) -> Response:
        return _json([j.summary() for j in jobs.all()])

    def job_of(request: Request) -> Any:
        job = jobs.get(_param(request, "job"))
        if job is None:
            raise NotFound(f'no job "{_param(request, "job")[:40]}"')
        return job

    @api("GET", "/api/jobs/{job}", "one job: its state, last event, result or error", am.JobInfo)
    async def get_job(request: Request) -> Response:
        return _json(job_of(request).summary())

    @api(
        "GET",
        "/api/jobs/{job}/events",
        "the job's progress as server-sent events: "
        "phase, bytes, total, rate; then done (the install result) or failed (the error)",
    )
    async def job_events(request: Request) -> Response:
        job = job_of(request)
        try:
            after = int(request.headers.get("last-event-id", "0"))
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

    @api("DELETE", "/api/jobs/{job}", "cancel a job: the same clean state as Ctrl-C", am.JobInfo)
    async def cancel_job(request: Request) -> Response:
        job = job_of(request)
        if not jobs.cancel(job):
            raise Refused(f'job "{job.id}" already finished ({job.state})')
        if job.task is not None:
            import asyncio

            await asyncio.wait([job.task], timeout=10)
        return _json(job.summary())

    # --- registry -----------------------------------------------------------------------

    @api(
        "GET", "/api/backends", "the registry in order (★ is default)", am.BackendRowInfo, many=True
    )
    async def backends(request: Request) -> Response:
        return _json(am.dump(await manager.backends_info()))

    @api(
        "POST", "/api/backends", "append a manual row", am.BackendRowResult, body=AddBackendRequest
    )
    async def add_backend(request: Request) -> Response:
        req: AddBackendRequest = await _body(request, AddBackendRequest)
        outcome = await manager.add_backend(
            req.id,
            kind=req.kind,
            path=req.path,
            name=req.name,
            default=req.default,
            force=req.force,
            generate=req.generate,
        )
        return _json(am.dump(outcome))

    @api("DELETE", "/api/backends/{row}", "remove a manual row", am.RemovedRow)
    async def remove_backend(request: Request) -> Response:
        outcome = await manager.remove_backend(_param(request, "row"))
        return _json(am.dump(outcome))

    @api(
        "POST",
        "/api/backends/{row}/default",
        "make the row the ★ of its classes",
        am.BackendRowResult,
        body=GenerateFlag,
    )
    async def set_default(request: Request) -> Response:
        req: GenerateFlag = await _body(request, GenerateFlag)
        outcome = await manager.set_default(_param(request, "row"), generate=req.generate)
        return _json(am.dump(outcome))

    # --- models -------------------------------------------------------------------------

    @api(
        "GET",
        "/api/models",
        "discovered models, the row each resolves to, and why",
        am.ModelInfo,
        many=True,
    )
    async def models(request: Request) -> Response:
        rows = am.dump(await manager.models_info())
        problems = await manager.folder_problems()
        headers = {"x-backendmgr-warnings": json.dumps(problems)} if problems else None
        return JSONResponse(rows, headers=headers)

    @api("GET", "/api/models/{model:path}/cmd", "the command line a model gets", am.CmdResult)
    async def cmd(request: Request) -> Response:
        return _json(am.dump(await manager.cmd(_param(request, "model"))))

    @api(
        "POST",
        "/api/models/{model:path}/pin",
        "keep the model on one registry row",
        am.PinResult,
        body=PinRequest,
    )
    async def pin(request: Request) -> Response:
        req: PinRequest = await _body(request, PinRequest)
        outcome = await manager.pin(_param(request, "model"), req.row, generate=req.generate)
        return _json(am.dump(outcome))

    @api(
        "POST",
        "/api/models/{model:path}/unpin",
        "let the model follow the class default",
        am.PinResult,
        body=GenerateFlag,
    )
    async def unpin(request: Request) -> Response:
        req: GenerateFlag = await _body(request, GenerateFlag)
        outcome = await manager.unpin(_param(request, "model"), generate=req.generate)
        return _json(am.dump(outcome))

    @api(
        "POST",
        "/api/models/{model:path}/set",
        "set per-model overrides (KEY: VALUE text)",
        am.ModelSettingsResult,
        body=SetRequest,
    )
    async def set_overrides(request: Request) -> Response:
        req: SetRequest = await _body(request, SetRequest)
        outcome = await manager.set_overrides(
            _param(request, "model"), req.values, generate=req.generate
        )
        return _json(am.dump(outcome))

    @api(
        "POST",
        "/api/models/{model:path}/unset",
        "clear per-model overrides",
        am.ModelSettingsResult,
        body=UnsetRequest,
    )
    async def unset_overrides(request: Request) -> Response:
        req: UnsetRequest = await _body(request, UnsetRequest)
        outcome = await manager.unset_overrides(
            _param(request, "model"), req.keys, generate=req.generate
        )
        return _json(am.dump(outcome))

    # --- generated config, doctor, config -----------------------------------------------

    @api(
        "GET",
        "/api/generate",
        "the generated llama-swap config as it is, and its validity",
        am.GeneratedText,
    )
    async def generated(request: Request) -> Response:
        return _json(am.dump(await manager.generated()))

    from ..swap.models import SwapStatus

    @api(
        "GET",
        "/api/status",
        "whether llama-swap runs, what it has loaded, and whether it holds backendmgr's file",
        SwapStatus,
    )
    async def swap_status(request: Request) -> Response:
        return _json(am.dump(await manager.swap.status()))

    @api(
        "POST",
        "/api/generate",
        "regenerate the llama-swap config",
        am.GenerateResult,
        body=GenerateRequest,
    )
    async def generate(request: Request) -> Response:
        req: GenerateRequest = await _body(request, GenerateRequest)
        outcome = await manager.generate(force=req.force, check=req.check)
        return _json(am.dump(outcome))

    @api(
        "POST",
        "/api/lock",
        "write backendmgr.lock beside the config file: every build, asset and SHA-256",
        am.LockResult,
    )
    async def lock(request: Request) -> Response:
        return _json(am.dump(await manager.lock()))

    @api(
        "POST",
        "/api/sync",
        "make this machine's builds the lock's: starts a job and answers its id at once",
        am.JobInfo,
        body=SyncRequest,
        status=202,
    )
    async def sync(request: Request) -> Response:
        req: SyncRequest = await _body(request, SyncRequest)

        def run(on_event: Any) -> Awaitable[Outcome]:
            return manager.sync(
                locked=req.locked,
                prune=req.prune,
                force=req.force,
                dry_run=req.dry_run,
                on_event=on_event,
            )

        job = jobs.start("sync", req.model_dump(), run)
        return _json(job.summary(), 202)

    @api(
        "POST",
        "/api/verify",
        "start each model's entry, wait for health, send one request, stop it: a job whose "
        "events are verifying (a model started) and verified (its result); done carries the "
        "report (VerifyReport)",
        am.JobInfo,
        body=VerifyRequest,
        status=202,
    )
    async def verify(request: Request) -> Response:
        req: VerifyRequest = await _body(request, VerifyRequest)

        async def run(on_event: Any) -> am.VerifyReport:
            def started(model_id: str, pid: int) -> None:
                said = f"{model_id}: starting"
                on_event(ProgressEvent("verifying", asset=model_id, message=said))

            def finished(result: am.VerifyResult) -> None:
                said = result.line()  # the CLI's line for it
                event = event_json(ProgressEvent("verifying", asset=result.id, message=said))
                on_event({**event, "phase": "verified", "result": am.dump(result)})

            results = await manager.verify(
                req.models or None,
                timeout=req.timeout,
                keep_going=req.keep_going,
                on_result=finished,
                on_start=started,
            )
            failed = sum(1 for r in results if not r.ok)
            return am.VerifyReport(results=results, failed=failed)

        job = jobs.start("verify", req.model_dump(), run, message=_verify_message)
        return _json(job.summary(), 202)

    @api("GET", "/api/doctor", "registry vs disk, stale pins, leftovers", am.DoctorReport)
    async def doctor(request: Request) -> Response:
        return _json(am.dump(await manager.doctor()))

    @api(
        "POST",
        "/api/doctor",
        "doctor; with fix, repair what can be repaired",
        am.DoctorReport,
        body=DoctorRequest,
    )
    async def doctor_fix(request: Request) -> Response:
        req: DoctorRequest = await _body(request, DoctorRequest)
        return _json(am.dump(await manager.doctor(fix=req.fix)))

    @api(
        "GET", "/api/which/{target:path}", "the executable that would run, and why", am.WhichResult
    )
    async def which(request: Request) -> Response:
        return _json(am.dump(await manager.which(_param(request, "target"))))

    @api("GET", "/api/config", "where the files are; the effective settings", am.ConfigInfo)
    async def config(request: Request) -> Response:
        return _json(am.dump(await manager.config_info()))

    # --- the document, the page ---------------------------------------------------------

    @api("GET", "/api/openapi.json", "this document")
    async def openapi(request: Request) -> Response:
        return _json(openapi_document([a for a, _ in table]))

    async def page(request: Request) -> Response:
        token = request.query_params.get("token")
        if token is not None and guard.matches(token[:600]):
            # the address serve printed: hand over the cookie, then drop the token from the
            # address bar and the history
            if request.headers.get("sec-fetch-site", "none") in ("none", "same-origin"):
                moved = Response(status_code=303, headers={"location": "/", **_PLAIN})
            else:
                # Opened from another site or a file (--open's page): a redirect would still
                # count as that site's navigation and the browser would keep the Strict
                # cookie from it; a navigation this page starts itself is same-origin.
                moved = Response(
                    ONWARD,
                    200,
                    media_type="text/html; charset=utf-8",
                    headers={**_PLAIN, "content-security-policy": "default-src 'none'"},
                )
            name, value = guard.cookie_header()
            moved.raw_headers.append((name, value))
            return moved
        if not guard.has_secret({k.lower(): v for k, v in request.headers.items()}):
            return Response(LOCKED, 401, media_type="text/html; charset=utf-8", headers=_PLAIN)
        html = _static("index.html")
        return Response(
            html,
            media_type="text/html; charset=utf-8",
            headers={
                "cache-control": "no-store",
                "content-security-policy": "default-src 'self'; img-src 'self' data:; "
                "frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
                "x-frame-options": "DENY",
                "referrer-policy": "no-referrer",
            },
        )

    async def static(request: Request) -> Response:
        name = _param(request, "name")
        kinds = {".js": "text/javascript", ".css": "text/css", ".svg": "image/svg+xml"}
        kind = kinds.get(Path(name).suffix) if STATIC_NAME.fullmatch(name) else None
        missing = {"error": f'no file "{one_line(name[:60])}"', "exit": 1}
        if kind is None:
            return _json(missing, 404)
        try:
            data = _static(name)
        except OSError:
            return _json(missing, 404)
        return Response(data, media_type=kind, headers={"cache-control": "no-store"})

    routes = [Route(a.path, h, methods=[a.method]) for a, h in table]
    routes += [
        Route("/", page, methods=["GET"]),
        Route("/static/{name}", static, methods=["GET"]),
    ]
    app = Starlette(
        routes=routes,
        exception_handlers={404: _http_error, 405: _http_error},
    )
    app.state.jobs = jobs
    app.state.table = [a for a, _ in table]
    return app


def _verify_message(report: BaseModel) -> str:
    assert isinstance(report, am.VerifyReport)
    total = len(report.results)
    if not report.failed:
        return f"{total} model(s) verified: all ok"
    return f"{total} model(s) verified: {report.failed} failed"


def _static(name: str) -> bytes:
    """A file shipped in the package (``backendmgr/web/static``): the page works offline."""
    return (resources.files("backendmgr.web") / "static" / name).read_bytes()


def openapi_document(table: list[Api]) -> dict[str, Any]:
    """OpenAPI 3.1 from the route table and the models' JSON schemas."""
    from .._version import __version__

    schemas: dict[str, Any] = {}

    def ref(model: type[BaseModel]) -> dict[str, Any]:
        schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
        for name, sub in schema.pop("$defs", {}).items():
            schemas.setdefault(name, sub)
        schemas.setdefault(model.__name__, schema)
        return {"$ref": f"#/components/schemas/{model.__name__}"}

    error = {"content": {"application/json": {"schema": ref(am.ErrorBody)}}}
    paths: dict[str, Any] = {}
    for a in table:
        path = a.path.replace(":path}", "}")
        op: dict[str, Any] = {"summary": a.summary, "operationId": _op_id(a)}
        params = [
            {"name": p, "in": "path", "required": True, "schema": {"type": "string"}}
            for p in _path_params(path)
        ]
        params += [
            {"name": name, "in": "query", "required": False, "schema": {"type": kind}}
            for name, kind in a.query
        ]
        if params:
            op["parameters"] = params
        if a.body is not None:
            op["requestBody"] = {
                "required": False,
                "content": {"application/json": {"schema": ref(a.body)}},
            }
        ok: dict[str, Any] = {"description": "OK"}
        if a.path.endswith("/events"):
            ok["content"] = {"text/event-stream": {"schema": {"type": "string"}}}
        elif a.answer is not None:
            schema = ref(a.answer)
            if a.many:
                schema = {"type": "array", "items": schema}
            ok["content"] = {"application/json": {"schema": schema}}
        op["responses"] = {
            str(a.status): ok,
            "4XX": {"description": "refused, not found or invalid", **error},
            "5XX": {"description": "the operation failed", **error},
        }
        paths.setdefault(path, {})[a.method.lower()] = op
    return {
        "openapi": "3.1.0",
        "info": {"title": "backendmgr", "version": __version__},
        "paths": paths,
        "components": {"schemas": schemas},
    }


def _path_params(path: str) -> list[str]:
    import re

    return re.findall(r"{(\w+)}", path)


def _op_id(a: Api) -> str:
    import re

    words = re.sub(r"[{}:]", "", a.path.removeprefix("/api/")).replace("/", "_").replace(".", "_")
    return f"{a.method.lower()}_{words or 'root'}"
