"""Who may talk to the server: the Host and Origin checks (DNS rebinding, CSRF) and the
per-server secret that every mutating request must carry.

On loopback without a token, reads need only a good Host; a change also needs the secret,
which the page gets as a ``SameSite=Strict`` cookie when it loads, so another site's page in
the same browser can neither read it nor send it. With a token (needed to bind elsewhere),
every request needs it: as that cookie, an ``Authorization: Bearer`` header, or once as
``?token=`` on the page's address, which then sets the cookie.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs

__all__ = ["COOKIE", "Guard", "is_loopback"]

COOKIE = "backendmgr_secret"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine only: localhost, 127.0.0.0/8 or ::1."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _host_port(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


@dataclass
class Guard:
    """The rules for one server bound to ``host:port``."""

    host: str
    port: int
    secret: str
    token_required: bool = False
    allowed_hosts: frozenset[str] = field(init=False)

    def __post_init__(self) -> None:
        names = {_host_port(self.host, self.port)}
        if is_loopback(self.host):
            names |= {_host_port("localhost", self.port)}
        self.allowed_hosts = frozenset(n.lower() for n in names)

    def check(self, scope: Scope) -> tuple[int, str] | None:
        """``None`` when the request may go on, else the status and the reason."""
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        host = headers.get("host", "").lower()
        if is_loopback(self.host) and host not in self.allowed_hosts:
            # A page on another name that resolves here (DNS rebinding) sends its own name.
            return 421, f'Host "{host[:100]}" is not this server; open {self.url()}'
        origin = headers.get("origin")
        if origin is not None and origin.lower() != f"http://{host}":
            return 403, f'requests from origin "{origin[:100]}" are refused (cross-site)'
        fetch_site = headers.get("sec-fetch-site")
        method = scope.get("method", "GET")
        if fetch_site not in (None, "same-origin", "none") and method not in SAFE_METHODS:
            return 403, "cross-site requests are refused"
        needs_secret = self.token_required or method not in SAFE_METHODS
        if needs_secret and not self._has_secret(headers, scope):
            what = "the server's token" if self.token_required else "the page's secret"
            return 403, f"this request needs {what}; reload the page"
        return None

    def _has_secret(self, headers: dict[str, str], scope: Scope) -> bool:
        offered: list[str] = []
        auth = headers.get("authorization", "")
        if auth.lower().startswith("bearer "):
            offered.append(auth[7:].strip())
        offered += [v for k, v in _cookies(headers.get("cookie", "")) if k == COOKIE]
        if self.token_required and scope.get("method") in SAFE_METHODS:
            query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
            offered += query.get("token", [])[:1]
        return any(hmac.compare_digest(o.encode(), self.secret.encode()) for o in offered)

    def cookie_header(self) -> tuple[bytes, bytes]:
        """The ``Set-Cookie`` the page gets: the secret, strict to this site, unseen by JS."""
        value = f"{COOKIE}={self.secret}; Path=/; HttpOnly; SameSite=Strict"
        return b"set-cookie", value.encode()

    def url(self) -> str:
        return f"http://{_host_port(self.host, self.port)}/"

    def middleware(self, app: ASGIApp) -> ASGIApp:
        """Wrap ``app``: a refused request gets a JSON error and never reaches it."""

        async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] != "http":
                await app(scope, receive, send)
                return
            refused = self.check(scope)
            if refused is None:
                await app(scope, receive, send)
                return
            status, reason = refused
            body = json.dumps({"error": reason, "exit": 1}).encode()
            await send(
                {
                    "type": "http.response.start",
                    "status": status,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"content-length", str(len(body)).encode()),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": body})

        return guarded


def _cookies(header: str) -> list[tuple[str, str]]:
    out = []
    for part in header.split(";")[:50]:
        name, sep, value = part.strip().partition("=")
        if sep:
            out.append((name, value))
    return out
