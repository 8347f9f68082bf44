"""A real ``backendmgr serve``: uvicorn on 127.0.0.1 (a free port) in a thread of this
process, or a real ``serve`` process (for signals and the terminal), a client that loaded the
page, and a job's event stream read to its end. Needs the web extra (``tests/web`` skips
without it)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
import pytest_asyncio

from backendmgr.manager import Manager
from backendmgr.web import Prepared, prepare
from tests.support.user import Setup
from tests.support.wait import await_until, wait_until


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
        wait_until(
            lambda: self.prepared.server.started or not self.thread.is_alive(),
            "the server started",
        )
        assert self.thread.is_alive(), "the server thread died"
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


def serving(url: str, proc: subprocess.Popen[str]) -> None:
    """Wait until a ``serve`` process answers HTTP at ``url`` (any status): its server loop
    runs, with Ctrl-C handled by it."""

    def answers() -> bool:
        try:
            httpx.get(url, timeout=5)
        except httpx.HTTPError:
            return False
        return True

    wait_until(answers, f"the server answered at {url}", timeout=60, proc=proc)


def interrupted(proc: subprocess.Popen[str], timeout: float = 20) -> tuple[str, str]:
    """Ctrl-C to a served process, and what it printed by the end (killed if it hangs)."""
    try:
        proc.send_signal(signal.SIGINT)
        return proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


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


async def finished(client: httpx.AsyncClient, job_id: str) -> dict[str, Any]:
    """The job's state once it is no longer running."""

    async def state() -> dict[str, Any] | None:
        job: dict[str, Any] = (await client.get(f"/api/jobs/{job_id}")).json()
        return job if job["state"] != "running" else None

    return await await_until(state, f"job {job_id} finished", timeout=120)
