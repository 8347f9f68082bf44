"""Who may talk to the server: the Host and Origin checks (DNS rebinding, CSRF) and the
secret that every API request must carry.

The secret reaches only whoever started the server: ``serve`` prints the page's address with
``?token=SECRET`` on its own terminal. Opening that address sets a ``SameSite=Strict``,
``HttpOnly`` cookie and redirects to ``/`` (the token leaves the address bar). Every
``/api/*`` request needs the secret, as that cookie or an ``Authorization: Bearer`` header;
the page itself without it is a short note saying where to find the address. On loopback
without ``--token`` the secret lives in ``<home>/serve-secret`` (0600), so a browser's cookie
outlives a restart; with a token, the token is the secret.
"""

from __future__ import annotations

import contextlib
import hmac
import ipaddress
import json
import os
import re
import secrets
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import InvalidInput
from ..limits import TOKEN_CHARS

__all__ = [
    "COOKIE_MAX_AGE",
    "Guard",
    "check_token",
    "is_loopback",
    "load_secret",
]

SECRET_FILE = "serve-secret"
COOKIE_MAX_AGE = 30 * 24 * 3600
SHORTEST, LONGEST = TOKEN_CHARS
TOKEN_RE = re.compile(rf"[A-Za-z0-9._~-]{{{SHORTEST},{LONGEST}}}")
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


def check_token(token: str) -> str:
    """A token goes into URLs and cookies as it is: URL-safe characters only, and long
    enough not to be guessed."""
    if not TOKEN_RE.fullmatch(token):
        raise InvalidInput(
            f"the token must be at least {SHORTEST} characters (at most {LONGEST}) of "
            "A-Z a-z 0-9 . _ ~ -"
        )
    return token


def load_secret(home: Path) -> str:
    """The data home's server secret, made (0600, atomically) the first time it is needed;
    one that is unreadable as a token is replaced."""
    path = home / SECRET_FILE
    with contextlib.suppress(FileNotFoundError):
        with path.open("rb") as fh:
            text = fh.read(600).decode("ascii", "replace").strip()
        if TOKEN_RE.fullmatch(text):
            if path.stat().st_mode & 0o077:
                path.chmod(0o600)  # someone loosened it: only the owner reads a secret
            return text
        path.unlink()  # damaged: a new one below, as if it never existed
    home.mkdir(parents=True, exist_ok=True)
    fresh = secrets.token_urlsafe(32)
    tmp = home / f".{SECRET_FILE}.{secrets.token_hex(6)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(fresh.encode() + b"\n")
            fh.flush()
            os.fsync(fh.fileno())
        try:
            os.link(tmp, path)  # never replaces: two servers starting at once share one
        except FileExistsError:
            return load_secret(home)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
    from .._fs import fsync_dir

    fsync_dir(home)
    return fresh


def _host_port(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def is_api(path: str) -> bool:
    return path == "/api" or path.startswith("/api/")


@dataclass(repr=False, eq=False)
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

    @property
    def cookie(self) -> str:
        """Per port: two servers on one host keep their own cookies."""
        return f"backendmgr_{self.port}"

    def check(self, scope: Scope) -> tuple[int, str] | None:
        """``None`` when the request may go on, else the status and the reason."""
        headers = _headers(scope)
        host = headers.get("host", "").lower()
        if is_loopback(self.host) and host not in self.allowed_hosts:
            # A page on another name that resolves here (DNS rebinding) sends its own name.
            return 421, f'Host "{host[:100]}" is not this server; open {self.url()}'
        origin = headers.get("origin")
        if origin is not None and origin.lower() != f"http://{host}":
            return 403, f'requests from origin "{origin[:100]}" are refused (cross-site)'
        api = is_api(scope.get("path", ""))
        method = scope.get("method", "GET")
        if headers.get("sec-fetch-site") in ("cross-site", "same-site") and (
            api or method not in SAFE_METHODS
        ):
            # another site's <img src=/api/…> or form: refused before it can do anything
            return 403, "cross-site requests are refused"
        if api and not self.has_secret(headers):
            return 401, (
                "this request needs the server's secret: open the address that "
                "backendmgr serve printed"
            )
        return None

    def has_secret(self, headers: dict[str, str]) -> bool:
        offered: list[str] = []
        auth = headers.get("authorization", "")
        if auth.lower().startswith("bearer "):
            offered.append(auth[7:].strip())
        offered += [v for k, v in _cookies(headers.get("cookie", "")) if k == self.cookie]
        return any(self.matches(o) for o in offered)

    def matches(self, offered: str) -> bool:
        return hmac.compare_digest(offered.encode(), self.secret.encode())

    def cookie_header(self) -> tuple[bytes, bytes]:
        """The ``Set-Cookie`` the page gets: the secret, strict to this site, unseen by JS."""
        value = (
            f"{self.cookie}={self.secret}; Path=/; HttpOnly; SameSite=Strict; "
            f"Max-Age={COOKIE_MAX_AGE}"
        )
        return b"set-cookie", value.encode()

    def url(self) -> str:
        return f"http://{_host_port(self.host, self.port)}/"

    def page_url(self) -> str:
        """The address ``serve`` prints for its user: opening it hands the browser the secret."""
        return f"{self.url()}?token={self.secret}"

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
                        (b"cache-control", b"no-store"),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": body})

        return guarded


def _headers(scope: Scope) -> dict[str, str]:
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}


def _cookies(header: str) -> list[tuple[str, str]]:
    out = []
    for part in header.split(";")[:50]:
        name, sep, value = part.strip().partition("=")
        if sep:
            out.append((name, value))
    return out
