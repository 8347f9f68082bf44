"""``serve``: the HTTP API and the page (needs the ``web`` extra)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ...manager import Manager
    from ..render import Renderer

NEEDS_EXTRA = "backendmgr serve needs the web extra: pip install 'backendmgr[web]'"


def register(sub: argparse._SubParsersAction[Any]) -> None:
    s = sub.add_parser("serve", help="a local web page and HTTP API over the same operations")
    s.add_argument("--host", default="127.0.0.1", help="address to listen on (127.0.0.1)")
    s.add_argument("--port", type=_port, default=8577, help="port (8577; 0 picks a free one)")
    s.add_argument("--open", action="store_true", help="open the page in a browser")
    s.add_argument(
        "--token",
        help="require this token on every request (env BACKENDMGR_TOKEN); "
        "needed to listen beyond loopback",
    )
    s.set_defaults(handler=serve)


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f'"{text}" is not a port number') from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be 0 to 65535, not {value}")
    return value


async def serve(mgr: Manager, args: argparse.Namespace, out: Renderer) -> int:
    from ...errors import BackendmgrError, InvalidInput

    try:
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError:
        raise BackendmgrError(NEEDS_EXTRA) from None
    from ...web import serve as run_server

    token = args.token or mgr.environ.get("BACKENDMGR_TOKEN") or None
    if token is not None and len(token) < 16:
        raise InvalidInput("the token must be at least 16 characters")

    def ready(url: str) -> None:
        shown = f"{url}?token=…" if token else url
        out.info(f"backendmgr serving on {shown} (Ctrl-C stops)")
        if args.open:
            import webbrowser

            webbrowser.open(url + (f"?token={token}" if token else ""))

    await run_server(mgr, host=args.host, port=args.port, token=token, on_ready=ready)
    out.info("stopped")
    return 0
