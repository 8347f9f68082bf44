"""A real ``backendmgr serve`` (uvicorn on 127.0.0.1, a free port) in a thread, a user's
config with a models folder and a hand-made row, and a client that loaded the page."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio

pytest.importorskip("starlette", reason="the web extra is not installed")
pytest.importorskip("uvicorn", reason="the web extra is not installed")

from backendmgr.manager import Manager
from backendmgr.web import Prepared, prepare
from tests.support import user_setup


@dataclass
class Setup:
    home: Path
    config: Path
    models: Path
    manual_exe: Path


@pytest.fixture
def setup(tmp_path: Path, config_path: Path, monkeypatch: pytest.MonkeyPatch) -> Setup:
    monkeypatch.setenv("BACKENDMGR_VRAM_GB", "24")
    models, manual = user_setup(tmp_path, config_path)
    return Setup(tmp_path / "home", config_path, models, manual)


class Running:
    """A served app in its own thread and event loop, as ``backendmgr serve`` runs it."""

    def __init__(self, token: str | None = None) -> None:
        self.prepared: Prepared = prepare(
            Manager(retry_backoff=0.01), host="127.0.0.1", port=0, token=token
        )
        self.url = self.prepared.guard.url().rstrip("/")
        self.port = self.prepared.guard.port
        self.secret = self.prepared.guard.secret
        self.cookie = self.prepared.guard.cookie
        self.page_url = self.prepared.guard.page_url()  # what ``serve`` prints
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        asyncio.run(self.prepared.server.serve(sockets=[self.prepared.sock]))

    def start(self) -> Running:
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.prepared.server.started:
            assert time.monotonic() < deadline, "the server did not start"
            assert self.thread.is_alive(), "the server thread died"
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        self.prepared.server.should_exit = True
        self.thread.join(15)
        assert not self.thread.is_alive(), "the server did not stop"


@pytest.fixture
def server(setup: Setup) -> Iterator[Running]:
    running = Running().start()
    try:
        yield running
    finally:
        running.stop()


@pytest_asyncio.fixture
async def client(server: Running) -> AsyncIterator[httpx.AsyncClient]:
    """A client that opened the address ``serve`` printed (so it holds the secret cookie)
    and sends the page's Origin on changes, as the browser does."""
    async with httpx.AsyncClient(
        base_url=server.url, timeout=30, headers={"origin": server.url}
    ) as c:
        page = await c.get(server.page_url, follow_redirects=True)
        assert page.status_code == 200 and c.cookies[server.cookie] == server.secret
        yield c


async def sse(client: httpx.AsyncClient, job_id: str, *, until: Any = None) -> list[dict[str, Any]]:
    """Read a job's event stream to its end (or until ``until(event)`` holds)."""
    events: list[dict[str, Any]] = []
    async with client.stream("GET", f"/api/jobs/{job_id}/events") as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        name = None
        async for line in response.aiter_lines():
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                data = json.loads(line[6:])
                assert data["phase"] == name
                events.append(data)
                if until is not None and until(data):
                    break
    return events


def serve_process(*args: str, **env: str) -> tuple[subprocess.Popen[str], str]:
    """``backendmgr serve --port 0 ARGS`` as a real process (for signals and the terminal):
    the process and the first line it printed (``backendmgr serving on URL …``)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "backendmgr", "serve", "--port", "0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1", **env},
    )
    assert proc.stdout is not None
    return proc, proc.stdout.readline()
