"""HTTP plumbing shared by every operation: the route record, the JSON body and query flags
read within bounds, the one wrapper that turns any error into the API's JSON error (through
the same boundary as the CLI, :func:`backendmgr.boundary.failure_of`), and JSON answers."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import TypeAdapter, ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ..boundary import failure_of
from ..errors import UsageError, validation_problem
from ..immutable import frozen
from ..requests import Request as OperationRequest
from ..requests import args_of
from .jobs import one_line

if TYPE_CHECKING:
    from ..manager import Manager
    from .jobs import Jobs

__all__ = ["Call", "Handler", "Op", "answer_json", "guarded", "http_error", "read_body"]

MAX_BODY = 64 << 10  # a request body: a few ids and settings, never more
B = TypeVar("B", bound=OperationRequest)
Handler = Callable[[Request], Awaitable[Response]]


@frozen
class Call:
    """What an operation gets: the Manager, the jobs, the request and its checked body."""

    manager: Manager
    jobs: Jobs
    request: Request
    parsed: OperationRequest | None = None

    def body(self, model: type[B]) -> B:
        assert isinstance(self.parsed, model), "the route table names this body"
        return self.parsed

    def param(self, name: str) -> str:
        value: str = self.request.path_params[name]
        return value

    def query(self, name: str) -> str | None:
        return self.request.query_params.get(name) or None

    def flag(self, name: str) -> bool:
        value = self.request.query_params.get(name, "false").lower()
        if value not in ("1", "0", "true", "false", "yes", "no", ""):
            raise UsageError(f'{name}: "{value[:50]}" is not true or false')
        return value in ("1", "true", "yes")


Run = Callable[[Call], Awaitable[Any]]


@frozen
class Op:
    """One operation of the route table: how it is reached, what it answers (for the OpenAPI
    document), and ``run``, whose docstring is its summary."""

    method: str
    path: str
    run: Run
    answer: type[Any] | None = None  # a result (or a pydantic model) its schema is made of
    body: type[OperationRequest] | None = None
    many: bool = False
    status: int = 200
    query: tuple[tuple[str, str], ...] = ()  # (name, JSON type) of each optional query parameter

    @property
    def summary(self) -> str:
        return " ".join((self.run.__doc__ or "").split())


def answer_json(data: Any, status: int = 200) -> JSONResponse:
    return JSONResponse(data, status_code=status)


_ADAPTERS: dict[type[Any], TypeAdapter[Any]] = {}


def adapter(model: type[Any]) -> TypeAdapter[Any]:
    """pydantic's validator (and schema) of a request or result class (built once: building
    costs milliseconds)."""
    found = _ADAPTERS.get(model)
    if found is None:
        found = _ADAPTERS[model] = TypeAdapter(model)
    return found


def not_in_body(model: type[OperationRequest], path_names: Iterable[str]) -> set[str]:
    """The fields of ``model`` a body may not give: those the route's path names, and those
    kept off the API (``Arg.api``)."""
    names = set(path_names)
    return {name for name, arg in args_of(model) if not arg.api or name in names}


async def read_body(request: Request, model: type[OperationRequest]) -> OperationRequest:
    """The operation's request from the JSON body and the path's parameters (``/api/models/
    {model}/pin``: the model); too large, not JSON or the wrong shape is a 422 usage error,
    and a value the request refuses is its usage error (422) in the CLI's words."""
    raw = b""
    async for chunk in request.stream():
        raw += chunk
        if len(raw) > MAX_BODY:
            raise UsageError(f"the request body is larger than {MAX_BODY // 1024} KiB")
    try:
        data = json.loads(raw or b"{}")
    except (ValueError, RecursionError):  # RecursionError: "[[[[…" nested past the stack
        raise UsageError("the request body is not JSON") from None
    if isinstance(data, dict):
        fields = {name for name, _ in args_of(model)}
        for key in not_in_body(model, request.path_params):
            if key in data:
                raise UsageError(f"{key}: extra inputs are not permitted")
        data.update((k, v) for k, v in request.path_params.items() if k in fields)
    try:
        parsed: OperationRequest = adapter(model).validate_python(data)
    except ValidationError as exc:
        raise UsageError(validation_problem(exc).input_line()) from None
    return parsed


def json_only(request: Request) -> None:
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
        raise UsageError(
            f'the request body must be application/json, not "{one_line(kind[:60]) or "none"}"'
        )


def guarded(handler: Handler) -> Handler:
    """``handler`` behind the JSON-only rule, every error answered as ``{"error", "exit"}``
    with its status: never a traceback or an HTML page."""

    async def wrapped(request: Request) -> Response:
        try:
            json_only(request)
            return await handler(request)
        except Exception as exc:
            failure = failure_of(exc)
            return answer_json(failure.body(), failure.http_status)

    return wrapped


async def http_error(request: Request, exc: Exception) -> Response:
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
