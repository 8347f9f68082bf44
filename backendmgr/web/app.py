"""The HTTP API and the page, assembled: each operation of the route table (``routes.py``)
becomes a Starlette route that reads its body, calls its handler (the same async Manager method
as its CLI command) and answers the same keys as its ``--json`` (validated by ``api_models``).

    app.py       this assembly
    routes.py    the route table: one line per operation
    handlers.py  what each operation does (its docstring is its summary)
    http.py      body and flag reading, the error wrapper (the CLI's error boundary)
    openapi.py   the OpenAPI document
    page.py      the page and its static files
    security.py  the HTTP guard: host, origin, secret
    jobs.py      install, update, sync and verify jobs and their events
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from .. import api_models as am
from ..changes import collecting
from ..results import Outcome
from .http import Call, Handler, Op, answer_json, guarded, http_error, read_body
from .jobs import Job, Jobs
from .openapi import openapi_document
from .page import page_routes
from .routes import ROUTES
from .security import Guard

if TYPE_CHECKING:
    from ..manager import Manager

__all__ = ["create_app", "openapi_document"]


def endpoint(op: Op, manager: Manager, jobs: Jobs) -> Handler:
    """The one handler shape: read the body the table names, run the operation, answer JSON
    (a result as ``--json`` dumps it, a job as its summary, a ready response as it is)."""

    async def handle(request: Request) -> Response:
        parsed = await read_body(request, op.body) if op.body is not None else None
        with collecting() as record:  # what a change wrote, as the CLI says it (issue 33)
            result: Any = await op.run(Call(manager, jobs, request, parsed))
        if isinstance(result, Outcome) and result.changes is None and record.document():
            result.changes = record.document()
        if isinstance(result, Response):
            return result
        if isinstance(result, Job):
            return answer_json(result.summary(), op.status)
        # a typed result as ``--json`` dumps it; plain data (the jobs' summaries) as it is
        return answer_json(am.dump(result), op.status)

    return guarded(handle)


def create_app(manager: Manager, guard: Guard) -> Starlette:
    """The Starlette application for one Manager, behind ``guard``."""
    jobs = Jobs()
    routes = [Route(op.path, endpoint(op, manager, jobs), methods=[op.method]) for op in ROUTES]
    routes += [Route(path, page, methods=["GET"]) for path, page in page_routes(guard)]
    app = Starlette(routes=routes, exception_handlers={404: http_error, 405: http_error})
    app.state.jobs = jobs
    app.state.table = list(ROUTES)
    return app
