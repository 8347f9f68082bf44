"""``backendmgr serve``: the HTTP API and the page, on Starlette served by uvicorn.

Needs the ``web`` extra; the CLI imports this package only for ``serve``.
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import Refused
from .security import (
    ASGIApp,
    Guard,
    Message,
    Receive,
    Scope,
    Send,
    check_token,
    is_loopback,
    load_secret,
)

if TYPE_CHECKING:
    from starlette.applications import Starlette

    from ..manager import Manager

__all__ = ["Prepared", "bind", "make_guard", "prepare", "serve"]


def make_guard(host: str, port: int, token: str | None, secret: str = "") -> Guard:
    """The server's rules; binding beyond loopback without a token is refused. Without a
    token the secret is ``secret`` (the data home's, see ``load_secret``)."""
    if not is_loopback(host) and not token:
        raise Refused(
            f"binding to {host} would let other machines drive installs; give --token "
            "(or BACKENDMGR_TOKEN), or keep the default 127.0.0.1"
        )
    if token:
        return Guard(host, port, check_token(token), token_required=True)
    return Guard(host, port, secret)


def bind(host: str, port: int) -> socket.socket:
    """Bind first, so that port 0 gets a free port and the Host check knows the real one."""
    from ..errors import InvalidInput

    try:
        infos = socket.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise InvalidInput(f'cannot bind to "{host}": {exc.strerror}') from None
    family, _, _, _, address = infos[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
    except OSError as exc:
        sock.close()
        raise Refused(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


@dataclass(repr=False, eq=False)
class Prepared:
    """A bound, not yet running server: ``await server.serve(sockets=[sock])`` runs it."""

    server: Any
    sock: socket.socket
    guard: Guard
    app: Starlette


def prepare(manager: Manager, *, host: str, port: int, token: str | None = None) -> Prepared:
    """Check the rules, bind, and build the app and the uvicorn server around it."""
    import uvicorn

    from .app import create_app

    make_guard(host, port, token, "x" * 16)  # refuse before binding anything
    secret = "" if token else load_secret(manager.paths.home)
    sock = bind(host, port)
    guard = make_guard(host, sock.getsockname()[1], token, secret)
    app = create_app(manager, guard)
    _quiet_shutdown_log()
    config = uvicorn.Config(
        guard.middleware(stopping(app)),
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=3,
        lifespan="off",
        proxy_headers=False,  # no proxy in front: a client's X-Forwarded-For is not believed
        server_header=False,
    )
    return Prepared(_Server(config, app), sock, guard, app)


async def serve(
    manager: Manager,
    *,
    host: str,  # the defaults: backendmgr.requests.ServeRequest
    port: int,
    token: str | None = None,
    on_ready: Callable[[str], None] | None = None,
) -> None:
    """Serve until Ctrl-C (or SIGTERM); running jobs are cancelled and cleaned up first.
    ``on_ready`` gets the page's address with its token (for the user who started it)."""
    prepared = prepare(manager, host=host, port=port, token=token)
    if on_ready is not None:
        on_ready(prepared.guard.page_url())
    await prepared.server.serve(sockets=[prepared.sock])


def stopping(app: ASGIApp) -> ASGIApp:
    """Wrap ``app``: a request still running when Ctrl-C's grace period ends is cancelled by
    uvicorn; it answers 503 (when nothing was sent yet) instead of a traceback and a 500."""
    import asyncio

    async def wrapped(scope: Scope, receive: Receive, send: Send) -> None:
        started = False

        async def watched(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await app(scope, receive, watched)
        except asyncio.CancelledError:
            if scope["type"] != "http" or started:
                return
            body = b'{"error": "the server is stopping", "exit": 1}'
            headers = [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ]
            with contextlib.suppress(Exception):
                await send({"type": "http.response.start", "status": 503, "headers": headers})
                await send({"type": "http.response.body", "body": body})

    return wrapped


def _quiet_shutdown_log() -> None:
    """uvicorn says ERROR when it cancels requests after the grace period; that is Ctrl-C
    working as asked (the requests answer 503), not an error for the user's terminal."""
    import logging

    log = logging.getLogger("uvicorn.error")
    if not any(isinstance(f, _GraceFilter) for f in log.filters):
        log.addFilter(_GraceFilter())


class _GraceFilter:
    def filter(self, record: Any) -> bool:
        return "timeout graceful shutdown exceeded" not in str(record.msg)


def _make_server_class() -> type[Any]:
    import uvicorn

    class Server(uvicorn.Server):
        """uvicorn's server, but cancelling jobs before it waits for connections (their
        progress streams end then), and not re-raising Ctrl-C once stopped cleanly."""

        def __init__(self, config: uvicorn.Config, app: Starlette) -> None:
            super().__init__(config)
            self.app = app

        async def serve(self, sockets: list[socket.socket] | None = None) -> None:
            with self.capture_signals():
                await self._serve(sockets)
                self._captured_signals.clear()

        async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
            await self.app.state.jobs.close()
            await super().shutdown(sockets)

    return Server


def _Server(config: Any, app: Starlette) -> Any:
    """uvicorn is imported only when serving, so the class is made on first use."""
    return _make_server_class()(config, app)
