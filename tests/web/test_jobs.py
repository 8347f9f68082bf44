"""Jobs at their limits: the cap on running jobs, verify as a cancellable job whose child
dies with it, a server that stops while a job will not, and Ctrl-C with a request open."""

from __future__ import annotations

import asyncio
import signal
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from backendmgr.mirror import MirrorHandler, MirrorServer
from backendmgr.results import Outcome
from backendmgr.web.jobs import MAX_FINISHED, MAX_RUNNING, Jobs
from tests.support import Setup, await_until, big_release, wait_until
from tests.support.processes import recorded_pids, running
from tests.support.web import serve_process, sse

MODEL = "qwen3-8b-q4_k_m"


def sleeper(tmp_path: Path) -> tuple[Path, Path]:
    """A llama-server stand-in that answers the probes, then never gets healthy: each start
    writes its pid, so a test can check it is gone."""
    pids = tmp_path / "pids"
    exe = tmp_path / "sleeper" / "llama-server"
    exe.parent.mkdir()
    exe.write_text(
        "#!/bin/sh\n"
        'case "$1" in\n'
        '  --help) echo "usage: llama-server"; exit 0;;\n'
        '  --version) echo "version: 1 (b1)"; exit 0;;\n'
        "esac\n"
        f'echo $$ >> "{pids}"\n'
        "exec sleep 600\n"
    )
    exe.chmod(0o755)
    return exe, pids


@pytest.mark.asyncio
async def test_verify_jobs_are_capped_and_cancelling_one_kills_its_child(
    client: httpx.AsyncClient, setup: Setup, tmp_path: Path
) -> None:
    exe, pids = sleeper(tmp_path)
    added = await client.post(
        "/api/backends", json={"id": "slow", "kind": "llama", "path": str(exe)}
    )
    assert added.status_code == 200, added.text
    assert (await client.post(f"/api/models/{MODEL}/pin", json={"row": "slow"})).status_code == 200
    started = []
    for _ in range(MAX_RUNNING):
        got = await client.post("/api/verify", json={"models": [MODEL], "timeout": 600})
        assert got.status_code == 202, got.text
        started.append(got.json()["id"])
    # one more of any kind is refused, in a sentence, and starts nothing
    for path, body in (
        ("/api/verify", {"models": [MODEL]}),
        ("/api/builds", {"component": "llama-server"}),
        ("/api/sync", {}),
    ):
        refused = await client.post(path, json=body)
        assert refused.status_code == 409, refused.text
        assert refused.json()["error"] == (
            f"{MAX_RUNNING} jobs are running already; wait for one to finish or cancel one"
        )
    assert len((await client.get("/api/jobs")).json()) == MAX_RUNNING
    # each job says which model it started
    for job_id in started:
        first = await sse(client, job_id, until=lambda e: True)
        assert first[0]["phase"] == "verifying" and first[0]["asset"] == MODEL
    children = await anyio.to_thread.run_sync(recorded_pids, pids, MAX_RUNNING)
    assert all(running(pid) for pid in children)

    for job_id in started:
        cancelled = await client.request("DELETE", f"/api/jobs/{job_id}")
        assert cancelled.status_code == 200, cancelled.text
        assert cancelled.json()["state"] == "cancelled"
        assert (await sse(client, job_id))[-1]["phase"] == "cancelled"
    await await_until(
        lambda: not any(running(pid) for pid in children),
        "every verify child ended with its cancelled job",
    )
    # room again
    again = await client.post("/api/verify", json={"models": [MODEL], "timeout": 600})
    assert again.status_code == 202
    assert (await client.request("DELETE", f"/api/jobs/{again.json()['id']}")).status_code == 200


@pytest.mark.asyncio
async def test_finished_jobs_are_trimmed() -> None:
    jobs = Jobs()

    async def run(on_event: Any) -> Outcome:
        return Outcome(message="ok")

    for _ in range(MAX_FINISHED + 30):
        job = jobs.start("test", {}, run)
        assert job.task is not None
        await job.task
    assert MAX_FINISHED <= len(jobs.all()) <= MAX_FINISHED + 1
    assert all(j.state == "done" for j in jobs.all())


@pytest.mark.asyncio
async def test_closing_waits_a_bounded_time_for_a_stuck_job(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A job whose clean-up hangs does not keep the server from stopping; it says so."""
    jobs = Jobs()
    release = asyncio.Event()
    entered = asyncio.Event()

    async def stuck(on_event: Any) -> Outcome:
        try:
            entered.set()
            await asyncio.sleep(60)
        finally:
            await release.wait()  # clean-up that does not end
        return Outcome(message="never")

    job = jobs.start("test", {}, stuck)
    await asyncio.wait_for(entered.wait(), 30)
    began = time.monotonic()
    await jobs.close(wait=0.5)
    assert 0.4 < time.monotonic() - began < 3
    err = capsys.readouterr().err
    assert err == (
        "warning: 1 job(s) still cleaning up after 0.5 s; stopping anyway "
        "(doctor --fix tidies what they leave)\n"
    )
    release.set()
    assert job.task is not None
    await asyncio.wait([job.task])
    assert job.state == "cancelled"


def test_ctrl_c_with_requests_open_prints_no_traceback(
    mirror: MirrorServer, mirror_root: Path, setup: Setup
) -> None:
    """Ctrl-C while a progress stream and a cancel are in flight: the server stops at once,
    exit 0, and nothing but its own lines on the terminal."""
    big_release(mirror_root, "b100")
    mirror.throttle = 128 << 10
    proc, line = serve_process()
    errors: list[BaseException] = []
    never = threading.Event()  # the listing that does not come (until the test ends)
    try:
        url = line.split()[3]
        base = url.split("?")[0]
        client = httpx.Client(base_url=base, timeout=30, headers={"origin": base.rstrip("/")})
        client.get(url)
        job = client.post("/api/builds", json={"component": "llama-server", "version": "b100"})
        assert job.status_code == 202, job.text
        job_id = job.json()["id"]
        streaming = threading.Event()

        def stream() -> None:
            try:
                with client.stream("GET", f"/api/jobs/{job_id}/events") as response:
                    for _ in response.iter_lines():
                        streaming.set()
            except httpx.HTTPError:
                pass  # the server went away: expected
            except BaseException as exc:
                errors.append(exc)

        reader = threading.Thread(target=stream, daemon=True)
        reader.start()
        assert streaming.wait(20)
        wait_until(
            lambda: list((setup.home / "downloads").glob("*.part")),
            "the download started",
            proc=proc,
        )
        answers: list[httpx.Response] = []

        # and a request whose handler is waiting on a listing that does not come
        def stall(handler: MirrorHandler) -> bool:
            if "releases" in handler.path:
                never.wait(60)
            return False  # then served as usual

        mirror.hooks.append(stall)
        waiting = threading.Thread(
            target=lambda: _quietly(
                lambda: answers.append(client.get("/api/releases/llama-server?refresh=1"))
            ),
            daemon=True,
        )
        waiting.start()
        wait_until(
            lambda: [p for p, _ in mirror.requests if "releases" in p and "download" not in p][1:],
            "the listing was asked for",
            proc=proc,
        )
        started = time.monotonic()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
        assert time.monotonic() - started < 15
        reader.join(10)
        waiting.join(10)
        client.close()
    finally:
        never.set()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert "Traceback" not in err and "Error" not in err, err
    assert not errors
    # the request that was still waiting is told why, in JSON, not a bare 500
    (answer,) = answers
    assert answer.status_code == 503
    assert answer.json() == {"error": "the server is stopping", "exit": 1}
    assert out.strip().splitlines()[-1] == "stopped"


def _quietly(request: Any) -> bool:
    """True when ``request`` ended because the server went away (no answer at all)."""
    try:
        request()
    except httpx.HTTPError:
        return True
    return False
