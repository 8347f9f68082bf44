"""The page: ``/`` hands the server's secret over as a cookie and serves ``index.html``;
``/static/{name}`` serves the page's files shipped in the package (it works offline)."""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path

from starlette.requests import Request
from starlette.responses import Response

from .http import Handler, answer_json
from .jobs import one_line
from .security import Guard

__all__ = ["page_routes"]

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
PAGE_HEADERS = {
    "cache-control": "no-store",
    "content-security-policy": "default-src 'self'; img-src 'self' data:; "
    "frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
    "x-frame-options": "DENY",
    "referrer-policy": "no-referrer",
}
STATIC_KINDS = {".js": "text/javascript", ".css": "text/css", ".svg": "image/svg+xml"}


def page_routes(guard: Guard) -> list[tuple[str, Handler]]:
    """``(path, endpoint)`` for the page and its files, behind ``guard``'s secret."""

    async def page(request: Request) -> Response:
        token = request.query_params.get("token")
        if token is not None and guard.matches(token[:600]):
            return _hand_over(request, guard)
        if not guard.has_secret({k.lower(): v for k, v in request.headers.items()}):
            return Response(LOCKED, 401, media_type="text/html; charset=utf-8", headers=_PLAIN)
        html = _static("index.html")
        return Response(html, media_type="text/html; charset=utf-8", headers=PAGE_HEADERS)

    return [("/", page), ("/static/{name}", static)]


def _hand_over(request: Request, guard: Guard) -> Response:
    """The address serve printed: hand over the cookie, then drop the token from the address
    bar and the history."""
    if request.headers.get("sec-fetch-site", "none") in ("none", "same-origin"):
        moved = Response(status_code=303, headers={"location": "/", **_PLAIN})
    else:
        # Opened from another site or a file (--open's page): a redirect would still count as
        # that site's navigation and the browser would keep the Strict cookie from it; a
        # navigation this page starts itself is same-origin.
        moved = Response(
            ONWARD,
            200,
            media_type="text/html; charset=utf-8",
            headers={**_PLAIN, "content-security-policy": "default-src 'none'"},
        )
    name, value = guard.cookie_header()
    moved.raw_headers.append((name, value))
    return moved


async def static(request: Request) -> Response:
    name: str = request.path_params["name"]
    kind = STATIC_KINDS.get(Path(name).suffix) if STATIC_NAME.fullmatch(name) else None
    missing = {"error": f'no file "{one_line(name[:60])}"', "exit": 1}
    if kind is None:
        return answer_json(missing, 404)
    try:
        data = _static(name)
    except OSError:
        return answer_json(missing, 404)
    return Response(data, media_type=kind, headers={"cache-control": "no-store"})


def _static(name: str) -> bytes:
    """A file shipped in the package (``backendmgr/web/static``): the page works offline."""
    return (resources.files("backendmgr.web") / "static" / name).read_bytes()
