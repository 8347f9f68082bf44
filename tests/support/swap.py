"""The real llama-swap for tests (``../shared/llama-swap/bin/llama-swap``), packed into a
release of the shape its project publishes, and a model setup whose servers are the serving
stand-in of the verify tests."""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import shutil
import socket
import subprocess
import sys
import tarfile
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from backendmgr.mirror import POLL_S
from tests.support import publish
from tests.support.cli import CliResult
from tests.support.ggufs import write_gguf
from tests.support.paths import SHARED
from tests.support.processes import running
from tests.support.standins import SERVER_STANDIN
from tests.support.wait import wait_until

SWAP_BIN = SHARED / "llama-swap" / "bin" / "llama-swap"
needs_swap = pytest.mark.skipif(
    not SWAP_BIN.is_file(), reason=f"the real llama-swap is not at {SWAP_BIN}"
)
TAG = "v250"
VERSION = TAG.removeprefix("v")


def release_assets() -> dict[str, bytes]:
    """``llama-swap_<version>_linux_amd64.tar.gz`` holding the real binary, and the release's
    checksums file in goreleaser's format."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=1) as tf:
        tf.add(SWAP_BIN, "llama-swap")
        for name, text in (("LICENSE.md", b"MIT\n"), ("README.md", b"llama-swap\n")):
            info = tarfile.TarInfo(name)
            info.size = len(text)
            tf.addfile(info, io.BytesIO(text))
    archive = buf.getvalue()
    name = f"llama-swap_{VERSION}_linux_amd64.tar.gz"
    other = f"llama-swap_{VERSION}_darwin_arm64.tar.gz"
    sums = "".join(
        f"{hashlib.sha256(data).hexdigest()}  {n}\n"
        for n, data in ((name, archive), (other, b"not for this platform"))
    )
    return {
        name: archive,
        other: b"not for this platform",
        f"llama-swap_{VERSION}_checksums.txt": sums.encode(),
    }


def publish_swap(root: Path, assets: dict[str, bytes], tag: str = TAG) -> None:
    publish(root, "mostlygeek/llama-swap", tag, assets)


def standin(path: Path) -> Path:
    """The serving stand-in (``/health``, chat, …) as an executable a row can point at."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!{sys.executable}\n{SERVER_STANDIN}")
    path.chmod(0o755)
    return path


def model_setup(tmp_path: Path, config_path: Path) -> dict[str, Path]:
    """Two GGUF models served by a manual llama row (the stand-in), and a second row (another
    copy of it) to pin to."""
    models = tmp_path / "models"
    write_gguf(models / "alpha-q4_k_m.gguf", "qwen3", layers=4, ctx=4096)
    write_gguf(models / "beta-q4_k_m.gguf", "qwen3", layers=4, ctx=4096)
    first = standin(tmp_path / "opt" / "one" / "llama-server")
    second = standin(tmp_path / "opt" / "two" / "llama-server")
    config_path.parent.mkdir(parents=True, exist_ok=True)
    config_path.write_text(
        f"models_dirs: [{models}]\n"
        "backends:\n"
        f"  - {{id: one, kind: llama, path: {first}, default: true}}\n"
        f"  - {{id: two, kind: llama, path: {second}}}\n"
        "models:\n"
        "  beta-q4_k_m: {extra_args: --fake-child 1}\n"
        # llama-swap hands its model servers ports from 5800 up: two test workers running it at
        # once would hand out the same ones, so each setup starts from a port free right now
        f"llama_swap:\n  startPort: {free_start_port()}\n"  # the last key: tests add to it
    )
    return {"models": models, "one": first, "two": second}


def ok(result: CliResult) -> CliResult:
    assert result.code == 0, result.err
    return result


def free_port() -> int:
    from backendmgr.serve_check import free_port as pick

    return pick()


def free_start_port(count: int = 8) -> int:
    """A ``startPort`` for llama-swap, which counts its model servers' ports up from it: the
    first of ``count`` consecutive ports free right now, below the kernel's ephemeral range so
    that no client connection of a test running beside this one takes the next port."""
    import random
    import socket

    rng = random.Random()
    for _ in range(200):
        start = rng.randrange(20000, 32000 - count)
        socks: list[socket.socket] = []
        try:
            for port in range(start, start + count):
                sock = socket.socket()
                socks.append(sock)
                sock.bind(("127.0.0.1", port))
        except OSError:
            continue
        finally:
            for sock in socks:
                sock.close()
        return start
    raise AssertionError(f"no {count} consecutive free ports between 20000 and 32000")


def wait_for(check: Callable[[], Any], timeout: float = 20.0, what: str = "condition") -> Any:
    """:func:`wait_until` with this module's older argument order."""
    return wait_until(check, what, timeout=timeout, interval=0.05)


def get(url: str) -> Any:
    return httpx.get(url, timeout=5, trust_env=False).json()


def answering(url: str) -> bool:
    try:
        return httpx.get(f"{url}/health", timeout=1, trust_env=False).status_code == 200
    except httpx.HTTPError:
        return False


alive = running  # a zombie counts as gone


def start_up(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """``backendmgr up`` in a child process, as a user would start it."""
    return subprocess.Popen(
        [sys.executable, "-m", "backendmgr", "up", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )


def state(home: Path) -> dict[str, Any] | None:
    path = home / "swap" / "up.json"
    try:
        return dict(json.loads(path.read_text()))
    except (FileNotFoundError, ValueError):
        return None


def which_systemd_analyze() -> str | None:
    return shutil.which("systemd-analyze")


def web_status() -> dict[str, Any]:
    """The page's block comes from ``GET /api/status``: the same document as ``status``."""
    pytest.importorskip("starlette", reason="the web extra is not installed")
    from tests.support.web import Running

    web = Running().start()
    try:
        with httpx.Client(base_url=web.url, timeout=30, trust_env=False) as client:
            html = client.get(web.page_url, follow_redirects=True).text
            return {"status": client.get("/api/status").json(), "html": html}
    finally:
        web.stop()


def plant_state(home: Path, **fields: Any) -> Path:
    """``swap/up.json`` as ``up`` writes it, with ``fields`` in it (any JSON value)."""
    record = home / "swap" / "up.json"
    record.parent.mkdir(parents=True, exist_ok=True)
    data = {"pid": 1, "owner": os.getpid(), "listen": "127.0.0.1:9", "url": "http://127.0.0.1:9"}
    data |= {"config": "/x", "exe": "/y"} | fields
    record.write_text(json.dumps(data))
    return record


def _exec_done(pid: int) -> bool:
    """Whether ``pid`` runs llama-swap yet: /proc/PID/exe exists from the fork on (naming this
    Python until the exec), and the command line reads empty while the exec replaces it."""
    try:
        return os.path.samefile(f"/proc/{pid}/exe", SWAP_BIN) and bool(
            Path(f"/proc/{pid}/cmdline").read_bytes()
        )
    except OSError:
        return False


@contextlib.contextmanager
def real_swap(config: Path) -> Iterator[subprocess.Popen[bytes]]:
    """The real llama-swap serving ``config`` on a free port: a process that ``status``
    identifies as llama-swap (its executable, its -config), whatever its record's URL says."""
    proc = subprocess.Popen(
        [
            str(SWAP_BIN),
            "-config",
            str(config),
            "-listen",
            f"127.0.0.1:{free_port()}",
            "-watch-config",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        wait_until(lambda: _exec_done(proc.pid), "llama-swap started")
        yield proc
    finally:
        proc.kill()
        proc.wait(10)


@contextlib.contextmanager
def dripping_port() -> Iterator[str]:
    """A port whose holder accepts and then answers one byte a second, forever: never silent
    long enough for a read timeout, never done."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    done = threading.Event()
    answer = b"HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n" + b"x" * 1000000

    def drip(conn: socket.socket) -> None:
        with conn, contextlib.suppress(OSError):
            for i in range(len(answer)):
                if done.wait(1.0):
                    return
                conn.sendall(answer[i : i + 1])

    def accept() -> None:
        while not done.is_set():
            with contextlib.suppress(TimeoutError, OSError):
                conn, _ = server.accept()
                threading.Thread(target=drip, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}"
    finally:
        done.set()
        thread.join(5)
        server.close()


@contextlib.contextmanager
def answering_port(routes: dict[str, bytes]) -> Iterator[str]:
    """A stand-in on the port that answers each path of ``routes`` with its bytes (200)."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = routes.get(self.path.split("?")[0])
            self.send_response(200 if body is not None else 404)
            self.send_header("Content-Length", str(len(body or b"")))
            self.end_headers()
            self.wfile.write(body or b"")

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, args=(POLL_S,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def timed(run: Callable[[], Any]) -> tuple[Any, float]:
    started = time.monotonic()
    value = run()
    return value, time.monotonic() - started


def chat(url: str, model: str) -> Any:
    answer = httpx.post(
        f"{url}/v1/chat/completions",
        json={"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4},
        timeout=60,
        trust_env=False,
    )
    assert answer.status_code == 200, answer.text
    return answer.json()


def fake_pids(fake: Path) -> list[int]:
    path = fake / "pids"
    return [int(x) for x in path.read_text().split()] if path.exists() else []


def stop_everything(proc: subprocess.Popen[str], fake: Path) -> None:
    """After a failed test: nothing may outlive it."""
    if proc.poll() is None:
        proc.kill()
        proc.wait(10)
    for pid in fake_pids(fake):
        if alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, 9)
