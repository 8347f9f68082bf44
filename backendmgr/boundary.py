"""The one error boundary: any exception, as the one line, exit status and HTTP status that
both faces show (the CLI as ``error: <line>`` and its exit status, the API as
``{"error", "exit"}`` with the status). The table of classes is in ``errors.py``."""

from __future__ import annotations

import sys
from typing import NamedTuple

from .errors import (
    BackendmgrError,
    Cancelled,
    NetworkError,
    escaped,
    first_error,
    is_cancel,
    validation_problem,
)
from .net import NetSettings, describe_network_failure

__all__ = ["Failure", "failure_of"]


class Failure(NamedTuple):
    """What a face shows for an error: one line, the CLI's exit status, the API's status."""

    message: str
    exit_code: int
    http_status: int

    def body(self) -> dict[str, object]:
        """The API's ``{"error", "exit"}`` body."""
        return {"error": self.message, "exit": self.exit_code}


def failure_of(exc: BaseException) -> Failure:
    """The one boundary: any exception as ``(one line, exit status, HTTP status)``, used by the
    CLI (``error: <line>``) and the API (``{"error", "exit"}`` with the status)."""
    if isinstance(exc, BaseExceptionGroup):
        exc = first_error(exc)
    if isinstance(exc, BackendmgrError):
        return Failure(escaped(str(exc) or type(exc).__name__), exc.exit_code, exc.http_status)
    if is_cancel(exc):
        return Failure("cancelled", Cancelled.exit_code, Cancelled.http_status)
    # the libraries are looked up only when loaded: an error of theirs implies they are
    httpx = sys.modules.get("httpx")
    if httpx is not None and isinstance(exc, httpx.HTTPError | httpx.InvalidURL):
        try:
            url = str(exc.request.url)
        except (AttributeError, RuntimeError):
            url = ""
        try:
            net = NetSettings.from_env()  # the timeouts the client was made with
        except BackendmgrError:
            net = NetSettings()
        line = describe_network_failure(exc, url, net)
        return Failure(escaped(line), 1, NetworkError.http_status)
    pydantic = sys.modules.get("pydantic")
    if pydantic is not None and isinstance(exc, pydantic.ValidationError):
        problem = validation_problem(exc)
        return Failure(problem.line(f"invalid {escaped(exc.title, 100)}"), 1, 500)
    import subprocess

    if isinstance(exc, subprocess.TimeoutExpired):
        command = escaped(str(exc.cmd[0] if isinstance(exc.cmd, list | tuple) else exc.cmd), 200)
        return Failure(f"{command} did not finish within {exc.timeout:g} s", 1, 504)
    if isinstance(exc, TimeoutError):
        return Failure(escaped(str(exc)) or "timed out", 1, 504)
    if isinstance(exc, OSError):
        where = f" ({exc.filename})" if exc.filename else ""
        return Failure(escaped(f"{exc.strerror or str(exc) or type(exc).__name__}{where}"), 1, 500)
    if isinstance(exc, RecursionError | MemoryError):
        return Failure(f"the input is too large or nested too deep ({type(exc).__name__})", 1, 500)
    return Failure(f"internal error: {type(exc).__name__}", 1, 500)
