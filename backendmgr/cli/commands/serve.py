"""``serve``: the HTTP API and the page (needs the ``web`` extra)."""

from __future__ import annotations

import argparse
import html
import json
import os
import shlex
import shutil
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...requests import ServeRequest
from ..options import add_request, request_in

if TYPE_CHECKING:
    from ...manager import Manager
    from ..render import Renderer


def needs_extra() -> str:
    """How to get the web extra, fitting how backendmgr was installed: from a checkout (pip
    records its folder in ``direct_url.json``, editable or not) the command runs there, as
    ``pip install 'backendmgr[web]'`` finds no such distribution for a checkout. The pip is
    this interpreter's, so the extra lands where backendmgr runs."""
    pip = f"{shlex.quote(sys.executable)} -m pip install"
    found = _checkout()
    if found is None:
        how = f"{pip} 'backendmgr[web]'"
    else:
        folder, editable = found
        how = f"cd {shlex.quote(str(folder))} && {pip} {'-e ' if editable else ''}'.[web]'"
    return f"backendmgr serve needs the web extra (starlette, uvicorn): {how}"


def _checkout() -> tuple[Path, bool] | None:
    """The folder backendmgr was installed from, and whether editably; ``None`` for an install
    from a package index (or a wheel)."""
    from importlib import metadata
    from urllib.parse import urlsplit
    from urllib.request import url2pathname

    try:
        dist = metadata.distribution("backendmgr")
    except metadata.PackageNotFoundError:  # not installed: run from a checkout on sys.path
        root = Path(__file__).resolve().parents[3]
        return (root, True) if (root / "pyproject.toml").is_file() else None
    try:
        direct = json.loads(dist.read_text("direct_url.json") or "null")
    except ValueError:
        return None
    if not isinstance(direct, dict) or not isinstance(direct.get("dir_info"), dict):
        return None  # from an index, a wheel file or a VCS URL
    where = urlsplit(str(direct.get("url", "")))
    if where.scheme != "file":
        return None
    return Path(url2pathname(where.path)), direct["dir_info"].get("editable") is True


def register(sub: argparse._SubParsersAction[Any]) -> None:
    s = sub.add_parser("serve", help="a local web page and HTTP API over the same operations")
    add_request(s, ServeRequest)
    s.set_defaults(handler=serve)


async def serve(mgr: Manager, args: argparse.Namespace, out: Renderer) -> int:
    from ..._gc import collect_as_usual
    from ...errors import BackendmgrError, ConfigError, InvalidInput

    collect_as_usual()  # a server runs for days: the collector as Python has it

    try:
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError:
        raise BackendmgrError(needs_extra()) from None
    from ...web import serve as run_server
    from ...web.security import check_token

    request = request_in(args, ServeRequest)
    token = request.token or mgr.environ.get("BACKENDMGR_TOKEN") or None
    if token is not None:
        try:
            check_token(token)
        except InvalidInput as exc:  # typed: 2; from the environment, like a config file: 1
            if request.token:
                raise
            raise ConfigError(str(exc)) from None
    opened: list[Path] = []

    def ready(url: str) -> None:
        from urllib.parse import urlsplit

        where = urlsplit(url)
        remote = None
        if request.host.strip("[]") in ("0.0.0.0", "::"):  # every address: name one that reaches it
            import socket

            remote = f"http://{socket.gethostname()}:{where.port}/?{where.query}"
        if out.json_mode:  # one line, at once: a script that started the server reads it
            started = {"url": url, "host": where.hostname, "port": where.port, "pid": os.getpid()}
            if remote:
                started["remote_url"] = remote
            out.stdout.write(json.dumps(started) + "\n")
            out.stdout.flush()
        # the whole address, token and all: this is the terminal of whoever started it
        out.info(f"backendmgr serving on {url} (Ctrl-C stops)")
        if remote:
            out.info(f"from other machines: {remote}")
        if request.open:
            import webbrowser

            opened.append(redirect_file(url))
            try:
                browsed = webbrowser.open(opened[-1].as_uri())
            except Exception:  # webbrowser.Error, a BROWSER that cannot be run
                browsed = False
            if not browsed:  # one line: the page is still served at the address above
                out.warning(
                    "--open: no browser found to open the page (set BROWSER, or open the "
                    "address above yourself)"
                )

    try:
        await run_server(mgr, host=request.host, port=request.port, token=token, on_ready=ready)
    finally:
        for page in opened:
            shutil.rmtree(page.parent, ignore_errors=True)
    out.info("stopped")
    return 0


def redirect_file(url: str) -> Path:
    """A 0600 page in a private folder that sends the browser on to ``url``: the browser is
    started with this file's name, so the token never shows on a command line (as Jupyter
    does)."""
    folder = Path(tempfile.mkdtemp(prefix="backendmgr-open-"))
    page = folder / "open.html"
    target = html.escape(url, quote=True)
    text = (
        '<!doctype html>\n<html><head><meta charset="utf-8">'
        f'<meta http-equiv="refresh" content="0;url={target}">'
        "<title>backendmgr</title></head><body>"
        f'<p><a href="{target}">Open backendmgr</a></p>'
        f"<script>location.replace({json.dumps(url)});</script>"
        "</body></html>\n"
    )
    fd = os.open(page, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    return page
