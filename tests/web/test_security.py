"""Who may drive the server: Host (DNS rebinding), Origin and Sec-Fetch-Site (CSRF), the
page's secret, the token; and ``backendmgr serve`` itself as a user starts and stops it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from backendmgr.cli.commands.serve import NEEDS_EXTRA
from backendmgr.mirror import MirrorServer
from tests.web.conftest import Running, Setup

PIN = "/api/models/qwen3-8b-q4_k_m/pin"


@pytest.mark.asyncio
async def test_a_foreign_host_origin_or_site_is_refused_and_changes_nothing(
    server: Running, setup: Setup
) -> None:
    before = setup.config.read_bytes()
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as c:
        page = await c.get("/")
        secret = page.cookies["backendmgr_secret"]
        assert len(secret) >= 32
        good = {"origin": server.url}
        # DNS rebinding: evil.example resolves to 127.0.0.1, the browser sends its own name
        for host in (f"evil.example:{server.port}", "127.0.0.1", f"127.0.0.1:{server.port + 1}"):
            got = await c.get("/api/backends", headers={"host": host})
            assert got.status_code == 421, host
            assert "is not this server" in got.json()["error"]
            got = await c.post(PIN, json={"row": "llama-src"}, headers={"host": host, **good})
            assert got.status_code == 421
        # CSRF: another site's page posts to us; the browser names its origin and site
        for headers in (
            {"origin": "http://evil.example"},
            {"origin": "null"},
            {"origin": f"http://localhost:{server.port}"},  # another origin than the Host's
            {"origin": server.url, "sec-fetch-site": "cross-site"},
            {"origin": server.url, "sec-fetch-site": "same-site"},
        ):
            got = await c.post(PIN, json={"row": "llama-src"}, headers=headers)
            assert got.status_code == 403, headers
        # a change without the page's secret (a form or a script that never loaded the page)
        c.cookies.clear()
        got = await c.post(PIN, json={"row": "llama-src"}, headers=good)
        assert got.status_code == 403 and "secret" in got.json()["error"]
        wrong = await c.post(
            PIN, json={"row": "llama-src"}, headers={**good, "cookie": "backendmgr_secret=x"}
        )
        assert wrong.status_code == 403
        assert setup.config.read_bytes() == before
        # the same request from the page itself goes through, by cookie or by header
        ok = await c.post(
            PIN,
            json={"row": "llama-src"},
            headers={**good, "cookie": f"backendmgr_secret={secret}"},
        )
        assert ok.status_code == 200, ok.text
        ok = await c.post(
            "/api/models/qwen3-8b-q4_k_m/unpin",
            json={},
            headers={"authorization": f"Bearer {secret}", "host": f"localhost:{server.port}"},
        )
        assert ok.status_code == 200, ok.text
    # reads need no secret on loopback, but still the right Host
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as bare:
        assert (await bare.get("/api/backends")).status_code == 200


@pytest.mark.asyncio
async def test_with_a_token_every_request_needs_it(setup: Setup) -> None:
    token = "t0ken-" + "x" * 20
    running = Running(token=token).start()
    try:
        async with httpx.AsyncClient(base_url=running.url, timeout=10) as c:
            for path in ("/", "/api/backends", "/static/app.js", "/api/openapi.json"):
                assert (await c.get(path)).status_code == 403, path
            assert (await c.get("/api/backends", params={"token": "nope" * 8})).status_code == 403
            bearer = {"authorization": f"Bearer {token}"}
            assert (await c.get("/api/backends", headers=bearer)).status_code == 200
            # the page opened with ?token= sets the cookie; then the page's requests carry it
            page = await c.get("/", params={"token": token})
            assert page.status_code == 200 and c.cookies["backendmgr_secret"] == token
            assert (await c.get("/api/backends")).status_code == 200
            changed = await c.post(PIN, json={"row": "llama-src"}, headers={"origin": running.url})
            assert changed.status_code == 200
            # ?token= is for the page load only, never for a change
            c.cookies.clear()
            refused = await c.post(
                PIN, params={"token": token}, json={"row": "x"}, headers={"origin": running.url}
            )
            assert refused.status_code == 403
    finally:
        running.stop()


def test_beyond_loopback_without_a_token_is_refused_at_start(setup: Setup) -> None:
    for host in ("0.0.0.0", "192.0.2.1", "::"):
        shown = subprocess.run(
            [sys.executable, "-m", "backendmgr", "serve", "--host", host, "--port", "0"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert shown.returncode == 1, shown
        assert shown.stderr.startswith(f"error: binding to {host} would let other machines")
        assert "--token" in shown.stderr and "Traceback" not in shown.stderr
    short = subprocess.run(
        [sys.executable, "-m", "backendmgr", "serve", "--host", "0.0.0.0", "--token", "abc"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert short.returncode == 1 and "at least 16 characters" in short.stderr


def test_serve_prints_its_url_serves_and_stops_on_ctrl_c(setup: Setup) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "backendmgr", "serve", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("backendmgr serving on http://127.0.0.1:"), line
        url = line.split()[3]
        got = httpx.get(url + "api/backends", timeout=10)
        assert [r["id"] for r in got.json()] == ["llama-src"]
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert out.strip() == "stopped" and "Traceback" not in err


def test_a_busy_port_is_one_error_line(setup: Setup) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        shown = subprocess.run(
            [sys.executable, "-m", "backendmgr", "serve", "--port", str(port)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert shown.returncode == 1
    assert shown.stderr.startswith(f"error: cannot listen on 127.0.0.1:{port}")


def test_without_the_web_extra_serve_says_how_to_get_it(tmp_path: Path) -> None:
    """The extra's modules made unimportable, as in an install without ``[web]``."""
    code = (
        "import sys; sys.modules['uvicorn'] = None; sys.modules['starlette'] = None\n"
        "from backendmgr.cli.main import main; sys.exit(main(['serve']))"
    )
    started = time.monotonic()
    shown = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert shown.returncode == 1
    assert shown.stderr == f"error: {NEEDS_EXTRA}\n"
    assert time.monotonic() - started < 30
    # and the rest of the CLI does not need it
    listing = subprocess.run(
        [sys.executable, "-c", code.replace("['serve']", "['catalog', '--json']")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert listing.returncode == 0, listing.stderr


def test_ctrl_c_stops_a_running_install_cleanly(
    mirror: MirrorServer, mirror_root: Path, setup: Setup
) -> None:
    """Stopping the server cancels its jobs as Ctrl-C cancels the CLI's install: the
    download's .part stays for a resume, nothing half-installed, and the server exits 0."""
    from tests.web.test_api import big_release

    big_release(mirror_root, "b100")
    mirror.throttle = 256 << 10
    proc = subprocess.Popen(
        [sys.executable, "-m", "backendmgr", "serve", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().split()[3]
        with httpx.Client(base_url=url, timeout=10, headers={"origin": url.rstrip("/")}) as c:
            c.get("/")
            job = c.post("/api/builds", json={"component": "llama-server", "version": "b100"})
            assert job.status_code == 202, job.text
            deadline = time.monotonic() + 20
            while not list((setup.home / "downloads").glob("*.part")):
                assert time.monotonic() < deadline, "the download did not start"
                time.sleep(0.05)
            time.sleep(0.3)
        started = time.monotonic()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=20)
        assert time.monotonic() - started < 10
        assert out.strip().endswith("stopped")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    (part,) = (setup.home / "downloads").glob("*.part")
    assert part.stat().st_size > 0
    builds = setup.home / "builds"
    assert not builds.exists() or not [
        p for p in builds.rglob("*") if not p.name.endswith(".lock") and p.is_file()
    ]
    doctor = subprocess.run(
        [sys.executable, "-m", "backendmgr", "doctor"], capture_output=True, text=True, check=False
    )
    assert doctor.returncode == 0, doctor.stderr
