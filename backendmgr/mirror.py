"""A GitHub-compatible releases API over a plain folder, for air-gapped sites, the demo and tests.

Layout: ``<root>/<owner>/<repo>/<tag>/<asset>``. A tag folder may hold ``.release.json`` with
``published_at``, ``prerelease``, ``draft`` and ``name``. Assets are served with ``size``,
``digest`` (sha256), an ETag, and byte ranges, so resumed downloads work as against GitHub.
Standard library only: it must run anywhere backendmgr's Python runs.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlsplit

__all__ = ["POLL_S", "MirrorServer", "main"]

POLL_S = 0.01  # how often a started mirror's loop looks for stop()

Hook = Callable[["MirrorHandler"], bool]


class MirrorHandler(BaseHTTPRequestHandler):
    server: MirrorServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        if self.server.verbose:
            super().log_message(format, *args)

    @property
    def route(self) -> str:
        return unquote(urlsplit(self.path).path)

    def do_GET(self) -> None:
        self.server.record(self)
        for hook in list(self.server.hooks):
            if hook(self):
                return
        parts = [p for p in self.route.split("/") if p]
        if len(parts) == 4 and parts[0] == "repos" and parts[3] == "releases":
            self._listing(parts[1], parts[2])
        elif len(parts) == 6 and parts[0] == "repos" and parts[3:5] == ["releases", "tags"]:
            self._one_release(parts[1], parts[2], parts[5])
        elif len(parts) == 5 and parts[0] == "download":
            self._asset(*parts[1:])
        else:
            self.send_json(404, {"message": "Not Found"})

    def send_json(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _listing(self, owner: str, repo: str) -> None:
        releases = self.server.releases(owner, repo)
        if releases is None:
            self.send_json(404, {"message": "Not Found"})
            return
        data = json.dumps(releases).encode()
        etag = '"' + hashlib.sha256(data).hexdigest()[:32] + '"'
        if self.headers.get("If-None-Match") == etag:
            self.send_response(304)
            self.send_header("ETag", etag)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_json(200, releases, {"ETag": etag})

    def _one_release(self, owner: str, repo: str, tag: str) -> None:
        for release in self.server.releases(owner, repo) or []:
            if release["tag_name"] == tag:
                self.send_json(200, release)
                return
        self.send_json(404, {"message": "Not Found"})

    def _asset(self, owner: str, repo: str, tag: str, name: str) -> None:
        path = self.server.root / owner / repo / tag / name
        if name.startswith(".") or not path.is_file():
            self.send_json(404, {"message": "Not Found"})
            return
        size = path.stat().st_size
        etag = '"' + self.server.sha256(path)[:32] + '"'
        start, end = 0, size - 1
        status = 200
        wanted = self.headers.get("Range", "")
        if_range = self.headers.get("If-Range")
        if wanted.startswith("bytes=") and (if_range is None or if_range == etag):
            first, _, last = wanted[6:].partition("-")
            if first.isdigit():
                start = int(first)
                end = int(last) if last.isdigit() else size - 1
                if start >= size:
                    self.send_response(416)
                    self.send_header("Content-Range", f"bytes */{size}")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                status = 206
        self.send_response(status)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(end - start + 1))
        self.send_header("ETag", etag)
        self.send_header("Accept-Ranges", "bytes")
        if status == 206:
            self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
        self.end_headers()
        self.stream_file(path, start, end + 1, cut_after=self.server.cut_every)

    def stream_file(
        self, path: Path, start: int, stop: int, *, cut_after: int | None = None
    ) -> None:
        """Send bytes ``start:stop``; ``cut_after`` drops the connection early (tests)."""
        throttle = self.server.throttle
        sent = 0
        began = time.monotonic()
        with path.open("rb") as fh:
            fh.seek(start)
            remaining = stop - start
            while remaining > 0:
                chunk = fh.read(min(1 << 16, remaining))
                if not chunk:
                    break
                if cut_after is not None and sent + len(chunk) > cut_after:
                    self.wfile.write(chunk[: cut_after - sent])
                    self.wfile.flush()
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                self.wfile.write(chunk)
                sent += len(chunk)
                remaining -= len(chunk)
                if throttle:
                    ahead = sent / throttle - (time.monotonic() - began)
                    if ahead > 0:
                        time.sleep(ahead)


class MirrorServer(ThreadingHTTPServer):
    """Serve ``root``; ``hooks`` let tests inject faults, ``requests`` records what arrived."""

    daemon_threads = True

    def __init__(
        self,
        root: Path,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        throttle: int | None = None,
        cut_every: int | None = None,
        verbose: bool = False,
    ) -> None:
        super().__init__((host, port), MirrorHandler)
        self.root = Path(root)
        self.throttle = throttle
        # fault injection: drop every asset connection after this many bytes (a flaky link)
        self.cut_every = cut_every
        self.verbose = verbose
        self.hooks: list[Hook] = []
        self.requests: list[tuple[str, dict[str, str]]] = []
        self._digests: dict[tuple[str, int, float], str] = {}
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hung up mid-answer (a download cancelled, a connection dropped) is
        no server fault: socketserver would print a traceback onto the serving terminal."""
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)

    @property
    def base_url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}"

    def record(self, handler: MirrorHandler) -> None:
        with self._lock:
            self.requests.append((handler.path, dict(handler.headers.items())))

    def sha256(self, path: Path) -> str:
        st = path.stat()
        key = (str(path), st.st_size, st.st_mtime)
        with self._lock:
            if key in self._digests:
                return self._digests[key]
        digest = hashlib.sha256()
        with path.open("rb") as fh:
            while chunk := fh.read(1 << 20):
                digest.update(chunk)
        with self._lock:
            self._digests[key] = digest.hexdigest()
        return self._digests[key]

    def releases(self, owner: str, repo: str) -> list[dict[str, Any]] | None:
        folder = self.root / owner / repo
        if not folder.is_dir():
            return None
        out = []
        for tag_dir in sorted(
            (p for p in folder.iterdir() if p.is_dir()), key=os.path.getmtime, reverse=True
        ):
            meta: dict[str, Any] = {}
            meta_file = tag_dir / ".release.json"
            if meta_file.is_file():
                meta = json.loads(meta_file.read_text())
            published = meta.get("published_at") or datetime.fromtimestamp(
                tag_dir.stat().st_mtime, UTC
            ).strftime("%Y-%m-%dT%H:%M:%SZ")
            assets = []
            for i, path in enumerate(
                sorted(p for p in tag_dir.iterdir() if p.is_file() and not p.name.startswith("."))
            ):
                url = (
                    f"{self.base_url}/download/{quote(owner)}/{quote(repo)}/"
                    f"{quote(tag_dir.name)}/{quote(path.name)}"
                )
                assets.append(
                    {
                        "id": i + 1,
                        "name": path.name,
                        "size": path.stat().st_size,
                        "digest": f"sha256:{self.sha256(path)}",
                        "browser_download_url": url,
                        "content_type": "application/octet-stream",
                    }
                )
            out.append(
                {
                    "tag_name": tag_dir.name,
                    "name": meta.get("name", tag_dir.name),
                    "draft": bool(meta.get("draft")),
                    "prerelease": bool(meta.get("prerelease")),
                    "published_at": published,
                    "assets": assets,
                }
            )
        out.sort(key=lambda r: r["published_at"], reverse=True)
        return out

    def start(self) -> MirrorServer:
        """Serve in a thread; its loop looks for :meth:`stop` every 10 ms (socketserver's
        default, 0.5 s, made each stop wait up to half a second)."""
        self._thread = threading.Thread(
            target=self.serve_forever, kwargs={"poll_interval": POLL_S}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self.shutdown()
        self.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="mirror.py", description="Serve <owner>/<repo>/<tag>/<asset> as a GitHub releases API."
    )
    parser.add_argument("root", type=Path)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument(
        "--throttle", type=int, default=None, help="bytes per second per connection"
    )
    parser.add_argument(
        "--cut-every",
        type=int,
        default=None,
        metavar="BYTES",
        help="drop each asset connection after this many bytes (to try resume)",
    )
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    if not args.root.is_dir():
        parser.error(
            f"{args.root} is not a folder of releases (<owner>/<repo>/<tag>/<asset>); make one "
            f"with scripts/demo --keep {args.root} (the demo's) or backendmgr fetch {args.root} "
            "(a lock's assets)"
        )
    server = MirrorServer(
        args.root,
        args.host,
        args.port,
        throttle=args.throttle,
        cut_every=args.cut_every,
        verbose=args.verbose,
    )
    print(
        f"serving {args.root} at {server.base_url} (BACKENDMGR_GITHUB_API={server.base_url})",
        flush=True,
    )
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
