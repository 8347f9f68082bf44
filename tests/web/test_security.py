"""Who may drive the server: Host (DNS rebinding), Origin and Sec-Fetch-Site (CSRF), the
page's secret, the token; and ``backendmgr serve`` itself as a user starts and stops it."""

from __future__ import annotations

import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from backendmgr.cli.commands.serve import needs_extra
from backendmgr.mirror import MirrorServer
from tests.support import Setup, big_release, wait_until
from tests.support.cli import run_in_process
from tests.support.web import Running, serve_process, serving

PIN = "/api/models/qwen3-8b-q4_k_m/pin"


def cookie_of(response: httpx.Response, name: str) -> str:
    """The Set-Cookie header that sets ``name``."""
    (found,) = [v for v in response.headers.get_list("set-cookie") if v.startswith(name + "=")]
    return found


@pytest.mark.asyncio
async def test_only_the_printed_address_hands_out_the_secret(server: Running) -> None:
    """Whoever connects without the secret gets a note (401) and no cookie; the address
    ``serve`` printed sets the cookie and redirects to ``/`` so the token leaves the
    address bar; every API request, reads too, needs the secret."""
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as c:
        page = await c.get("/")
        assert page.status_code == 401 and "set-cookie" not in page.headers
        assert "text/html" in page.headers["content-type"]
        assert "backendmgr serve" in page.text and server.secret not in page.text
        for wrong in ("nope", server.secret[:-1], server.secret + "x", "x" * 5000):
            got = await c.get("/", params={"token": wrong})
            assert got.status_code == 401 and "set-cookie" not in got.headers
        for path in ("/api/backends", "/api/openapi.json", "/api/jobs", "/api/config"):
            got = await c.get(path)
            assert got.status_code == 401, path
            assert "address that backendmgr serve printed" in got.json()["error"]
        # ?token= on an API request is not a way in: only the cookie or the header
        got = await c.get("/api/backends", params={"token": server.secret})
        assert got.status_code == 401
        # the static files are the package's own, no secret in them
        assert (await c.get("/static/app.js")).status_code == 200

        assert server.page_url == f"{server.url}/?token={server.secret}"
        moved = await c.get(server.page_url)
        assert moved.status_code == 303 and moved.headers["location"] == "/"
        cookie = cookie_of(moved, f"backendmgr_{server.port}")
        assert cookie.startswith(f"backendmgr_{server.port}={server.secret};")
        for part in ("HttpOnly", "SameSite=Strict", "Path=/", f"Max-Age={30 * 24 * 3600}"):
            assert part in cookie.split("; "), cookie
        page = await c.get("/")
        assert page.status_code == 200 and "/static/app.js" in page.text
        # opened from another site or a file: the page moves on by itself (same-origin), as
        # a redirect would keep counting as the other site's and lose the Strict cookie
        c.cookies.clear()
        onward = await c.get(server.page_url, headers={"sec-fetch-site": "cross-site"})
        assert onward.status_code == 200
        assert '<meta http-equiv="refresh" content="0;url=/">' in onward.text
        assert server.secret not in onward.text
        assert cookie_of(onward, server.cookie).startswith(f"{server.cookie}={server.secret};")
        assert (await c.get("/")).status_code == 200
        assert (await c.get("/api/backends")).status_code == 200
        bearer = {"authorization": f"Bearer {server.secret}"}
        c.cookies.clear()
        assert (await c.get("/api/backends")).status_code == 401
        assert (await c.get("/api/backends", headers=bearer)).status_code == 200


def test_the_secret_is_the_data_homes_0600_and_survives_a_restart(setup: Setup) -> None:
    first = Running()
    first.prepared.sock.close()
    stored = setup.home / "serve-secret"
    assert stat.S_IMODE(stored.stat().st_mode) == 0o600
    assert stored.read_text().strip() == first.secret and len(first.secret) >= 40
    second = Running()
    second.prepared.sock.close()
    assert second.secret == first.secret  # a browser's cookie still works after a restart
    assert not [p for p in setup.home.iterdir() if p.name.endswith(".tmp")]
    # loosened by someone: tightened again; damaged: replaced by a fresh one
    stored.chmod(0o644)
    third = Running()
    third.prepared.sock.close()
    assert third.secret == first.secret and stat.S_IMODE(stored.stat().st_mode) == 0o600
    stored.write_text("short\n")
    fourth = Running()
    fourth.prepared.sock.close()
    assert fourth.secret != first.secret and stored.read_text().strip() == fourth.secret
    assert stat.S_IMODE(stored.stat().st_mode) == 0o600


@pytest.mark.asyncio
async def test_two_servers_on_one_host_keep_their_own_cookies(setup: Setup) -> None:
    first = Running().start()
    second = Running(token="another-server-token-1234").start()
    try:
        async with httpx.AsyncClient(timeout=10) as c:
            for running in (first, second):
                assert (await c.get(running.page_url)).status_code == 303
            # one browser, both servers: each cookie is named for its port, none overwrote
            names = {cookie.name for cookie in c.cookies.jar}
            assert names == {f"backendmgr_{first.port}", f"backendmgr_{second.port}"}
            for running in (first, second):
                got = await c.get(running.url + "/api/backends")
                assert got.status_code == 200, got.text
    finally:
        second.stop()
        first.stop()


@pytest.mark.asyncio
async def test_a_foreign_host_origin_or_site_is_refused_and_changes_nothing(
    server: Running, setup: Setup
) -> None:
    before = setup.config.read_bytes()
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as c:
        await c.get(server.page_url)
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
        # reads too: <img src=/api/releases/x?refresh=1> on another site refetches nothing
        for site in ("cross-site", "same-site"):
            got = await c.get(
                "/api/releases/llama-server?refresh=1", headers={"sec-fetch-site": site}
            )
            assert got.status_code == 403 and "cross-site" in got.json()["error"]
        for site in ("same-origin", "none"):
            got = await c.get("/api/backends", headers={"sec-fetch-site": site})
            assert got.status_code == 200, site
        # a change without the secret (a form or a script that never had the address)
        c.cookies.clear()
        got = await c.post(PIN, json={"row": "llama-src"}, headers=good)
        assert got.status_code == 401 and "secret" in got.json()["error"]
        wrong = await c.post(
            PIN,
            json={"row": "llama-src"},
            headers={**good, "cookie": f"backendmgr_{server.port}=x"},
        )
        assert wrong.status_code == 401
        other_port = await c.post(  # the right secret under another server's cookie name
            PIN,
            json={"row": "llama-src"},
            headers={**good, "cookie": f"backendmgr_{server.port + 1}={server.secret}"},
        )
        assert other_port.status_code == 401
        assert setup.config.read_bytes() == before
        # the same request from the page itself goes through, by cookie or by header
        ok = await c.post(
            PIN,
            json={"row": "llama-src"},
            headers={**good, "cookie": f"backendmgr_{server.port}={server.secret}"},
        )
        assert ok.status_code == 200, ok.text
        ok = await c.post(
            "/api/models/qwen3-8b-q4_k_m/unpin",
            json={},
            headers={
                "authorization": f"Bearer {server.secret}",
                "host": f"localhost:{server.port}",
            },
        )
        assert ok.status_code == 200, ok.text


@pytest.mark.asyncio
async def test_a_change_with_a_body_must_say_json(client: httpx.AsyncClient, setup: Setup) -> None:
    """What a foreign form can send without asking (text/plain, a urlencoded form) never
    reaches a handler."""
    before = setup.config.read_bytes()
    body = b'{"row": "llama-src"}'
    for kind in (None, "text/plain", "application/x-www-form-urlencoded", "multipart/form-data"):
        headers = {"content-type": kind} if kind else {}
        got = await client.post(PIN, content=body, headers=headers)
        assert got.status_code == 422, (kind, got.text)
        assert "must be application/json" in got.json()["error"] and got.json()["exit"] == 2
    got = await client.request("DELETE", "/api/backends/llama-src", content=b"x")
    assert got.status_code == 422
    assert setup.config.read_bytes() == before
    # JSON with a charset is JSON; a change without a body needs no type
    ok = await client.post(
        PIN, content=body, headers={"content-type": "application/json; charset=utf-8"}
    )
    assert ok.status_code == 200, ok.text
    assert (await client.post("/api/lock")).status_code == 200


@pytest.mark.asyncio
async def test_with_a_token_every_request_needs_it(setup: Setup) -> None:
    token = "t0ken-" + "x" * 20
    running = Running(token=token).start()
    try:
        assert running.secret == token and not (setup.home / "serve-secret").exists()
        async with httpx.AsyncClient(base_url=running.url, timeout=10) as c:
            for path in ("/", "/api/backends", "/api/openapi.json"):
                assert (await c.get(path)).status_code == 401, path
            assert (await c.get("/static/app.js")).status_code == 200
            assert (await c.get("/api/backends", params={"token": token})).status_code == 401
            bearer = {"authorization": f"Bearer {token}"}
            assert (await c.get("/api/backends", headers=bearer)).status_code == 200
            # the printed address sets the cookie; then the page's requests carry it
            page = await c.get(running.page_url, follow_redirects=True)
            assert page.status_code == 200 and c.cookies[running.cookie] == token
            assert (await c.get("/api/backends")).status_code == 200
            changed = await c.post(PIN, json={"row": "llama-src"}, headers={"origin": running.url})
            assert changed.status_code == 200
            # ?token= is for the page load only, never for a change
            c.cookies.clear()
            refused = await c.post(
                PIN, params={"token": token}, json={"row": "x"}, headers={"origin": running.url}
            )
            assert refused.status_code == 401
    finally:
        running.stop()


def test_beyond_loopback_without_a_token_is_refused_at_start(
    setup: Setup, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Refused before anything listens: ``main()`` in this process says so (the real process's
    start and stop are tested below)."""
    for host in ("0.0.0.0", "192.0.2.1", "::"):
        shown = run_in_process("serve", "--host", host, "--port", "0")
        assert shown.code == 1, shown
        assert shown.err.startswith(f"error: binding to {host} would let other machines")
        assert "--token" in shown.err and "Traceback" not in shown.err
    short = run_in_process("serve", "--host", "0.0.0.0", "--token", "abc")
    assert short.code == 2 and "at least 16 characters" in short.err  # typed wrong
    long = run_in_process("serve", "--token", "x" * 513)  # the request's limit is the rule's
    assert long.code == 2 and "--token: must have at most 512 characters" in long.err, long
    for bad in ("x" * 15, "a" * 20 + "/", "ä" * 20, "a b" * 8, "x" * 513):
        monkeypatch.setenv("BACKENDMGR_TOKEN", bad)
        shown = run_in_process("serve", "--port", "0")
        assert shown.code == 1, bad
        assert shown.err == (
            "error: the token must be at least 16 characters (at most 512) of A-Z a-z 0-9 . _ ~ -\n"
        ), bad
    helped = run_in_process("serve", "--help")
    assert "BACKENDMGR_TOKEN is safer" in " ".join(helped.out.split())


def test_serve_prints_its_url_serves_and_stops_on_ctrl_c(setup: Setup) -> None:
    proc, line = serve_process()
    try:
        assert line.startswith("backendmgr serving on http://127.0.0.1:"), line
        url = line.split()[3]
        secret = (setup.home / "serve-secret").read_text().strip()
        assert url.endswith(f"/?token={secret}"), url  # the user's own terminal: all of it
        base = url.split("?")[0]
        assert httpx.get(base + "api/backends", timeout=10).status_code == 401
        with httpx.Client(timeout=10) as c:
            assert c.get(url, follow_redirects=True).status_code == 200
            got = c.get(base + "api/backends")
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
        shown = run_in_process("serve", "--port", str(port))
    assert shown.code == 1
    assert shown.err.startswith(f"error: cannot listen on 127.0.0.1:{port}")


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
    assert shown.stderr == f"error: {needs_extra()}\n"
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
    big_release(mirror_root, "b100")
    mirror.throttle = 256 << 10
    proc, line = serve_process()
    try:
        url = line.split()[3]
        base = url.split("?")[0]
        with httpx.Client(base_url=base, timeout=10, headers={"origin": base.rstrip("/")}) as c:
            c.get(url)
            job = c.post("/api/builds", json={"component": "llama-server", "version": "b100"})
            assert job.status_code == 202, job.text
            part = wait_until(
                lambda: next((setup.home / "downloads").glob("*.part"), None),
                "the download started",
                proc=proc,
            )
            wait_until(lambda: part.stat().st_size > 0, "the first bytes arrived", proc=proc)
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


BROWSER = """
import json, os, stat, sys
from urllib.parse import urlparse
from urllib.request import url2pathname
page = url2pathname(urlparse(sys.argv[1]).path)
record = {
    "argv": sys.argv[1:],
    "mode": stat.S_IMODE(os.stat(page).st_mode),
    "dir_mode": stat.S_IMODE(os.stat(os.path.dirname(page)).st_mode),
    "page": page,
    "text": open(page).read(),
}
with open(os.environ["RECORD"] + ".tmp", "w") as fh:
    json.dump(record, fh)
os.replace(os.environ["RECORD"] + ".tmp", os.environ["RECORD"])
"""


def test_open_never_puts_the_token_on_a_command_line(setup: Setup, tmp_path: Path) -> None:
    """--open starts the browser on a private 0600 file that forwards to the address (what
    Jupyter does): other users can read a command line, not that file."""
    import json

    browser = tmp_path / "browser"
    browser.write_text(f"#!{sys.executable}\n{BROWSER}")
    browser.chmod(0o755)
    record = tmp_path / "opened.json"
    proc, line = serve_process(
        "--open", BROWSER=str(browser), RECORD=str(record), DISPLAY="", WAYLAND_DISPLAY=""
    )
    try:
        url = line.split()[3]
        secret = (setup.home / "serve-secret").read_text().strip()
        wait_until(record.exists, "the browser was started", proc=proc)
        serving(url.split("?")[0], proc)  # a Ctrl-C before it serves is a cancelled start
        opened = json.loads(record.read_text())
        page = Path(opened["page"])
        assert page.is_file()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert len(opened["argv"]) == 1 and opened["argv"][0].startswith("file://")
    assert secret not in " ".join(opened["argv"])
    assert opened["mode"] == 0o600 and opened["dir_mode"] == 0o700
    assert f'<meta http-equiv="refresh" content="0;url={url}">' in opened["text"]
    assert f'location.replace("{url}")' in opened["text"]
    assert not page.parent.exists()  # removed when the server stops


def test_on_every_address_it_names_one_other_machines_can_open(setup: Setup) -> None:
    import socket

    token = "t0ken-for-the-lan-0123456789"
    proc, line = serve_process("--host", "0.0.0.0", BACKENDMGR_TOKEN=token)
    try:
        assert proc.stdout is not None
        port = line.split()[3].split(":")[2].split("/")[0]
        other = proc.stdout.readline().strip()
        assert other == f"from other machines: http://{socket.gethostname()}:{port}/?token={token}"
        with httpx.Client(timeout=10) as c:  # this machine is one of them
            assert c.get(f"http://127.0.0.1:{port}/api/backends").status_code == 401
            ok = c.get(
                f"http://127.0.0.1:{port}/api/backends",
                headers={"authorization": f"Bearer {token}"},
            )
            assert ok.status_code == 200
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
