"""The HTTP API against a real uvicorn on 127.0.0.1 and a real httpx client: every endpoint,
install jobs with their progress stream, cancel, concurrency, and the CLI beside it."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from backendmgr.mirror import MirrorServer
from tests.support import Setup, big_release, publish_llama
from tests.support.cli import run_in_worker
from tests.support.manager import phases
from tests.support.web import Running, sse

ORDER = ["resolving", "downloading", "verifying", "extracting", "committing", "registering"]


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    """The real CLI in a child process, on the same config and home as the server."""
    return subprocess.run(
        [sys.executable, "-m", "backendmgr", *args],
        capture_output=True,
        text=True,
        env=dict(os.environ),
        timeout=120,
        check=False,
    )


async def install(client: httpx.AsyncClient, **body: Any) -> dict[str, Any]:
    response = await client.post("/api/builds", json={"component": "llama-server", **body})
    assert response.status_code == 202, response.text
    job: dict[str, Any] = response.json()
    assert job["state"] == "running" and job["id"]
    return job


# --- reads ---------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_every_read_endpoint_answers_what_the_manager_says(
    client: httpx.AsyncClient, setup: Setup
) -> None:
    catalog = (await client.get("/api/catalog")).json()
    assert "llama-server" in [c["id"] for c in catalog]
    assert {"suggested", "why", "variants", "activated"} <= set(catalog[0])

    rows = (await client.get("/api/backends")).json()
    assert [r["id"] for r in rows] == ["llama-src"]
    assert rows[0]["classes"] == ["llm"] and rows[0]["path"] == str(setup.manual_exe)

    models = (await client.get("/api/models")).json()
    (model,) = models
    assert model["id"] == "qwen3-8b-q4_k_m" and model["class"] == "llm"
    assert model["backend"]["id"] == "llama-src" and model["backend"]["reason"]

    cmd = (await client.get("/api/models/qwen3-8b-q4_k_m/cmd")).json()
    assert cmd["argv"][0] == str(setup.manual_exe)

    assert (await client.get("/api/builds")).json() == []
    assert (await client.get("/api/jobs")).json() == []
    which = (await client.get("/api/which/qwen3-8b-q4_k_m")).json()
    assert which["row"] == "llama-src" and which["exists"] is True
    config = (await client.get("/api/config")).json()
    assert config["config"] == str(setup.config)

    shown = (await client.get("/api/generate")).json()
    assert shown["exists"] is False and "does not exist" in shown["status"]
    written = await client.post("/api/generate", json={})
    assert written.status_code == 200, written.text
    assert written.json()["written"] is True and written.json()["models"] == 1
    shown = (await client.get("/api/generate")).json()
    assert shown["exists"] and shown["valid"] and shown["up_to_date"], shown
    assert "qwen3-8b-q4_k_m" in shown["text"]
    assert Path(shown["output"]).read_text() == shown["text"]

    doctor = (await client.get("/api/doctor")).json()
    assert doctor["ok"] is True, doctor
    fixed = await client.post("/api/doctor", json={"fix": True})
    assert fixed.status_code == 200 and fixed.json()["ok"] is True


@pytest.mark.asyncio
async def test_the_openapi_document_names_every_route(
    client: httpx.AsyncClient, server: Running
) -> None:
    doc = (await client.get("/api/openapi.json")).json()
    assert doc["openapi"].startswith("3.")
    listed = {(m.upper(), p) for p, ops in doc["paths"].items() for m in ops}
    served = {(a.method, a.path.replace(":path}", "}")) for a in server.prepared.app.state.table}
    assert listed == served
    assert ("POST", "/api/builds") in listed and ("DELETE", "/api/jobs/{job}") in listed
    schemas = doc["components"]["schemas"]
    assert {"InstallRequest", "BuildInfo", "ModelInfo", "ErrorBody", "JobInfo"} <= set(schemas)
    # the query parameters are declared, with their types
    query = {
        (path, method, q["name"], q["schema"]["type"])
        for path, ops in doc["paths"].items()
        for method, op in ops.items()
        for q in op.get("parameters", [])
        if q["in"] == "query"
    }
    assert ("/api/builds/{build}", "delete", "force", "boolean") in query
    assert ("/api/releases/{component}", "get", "limit", "integer") in query
    assert ("/api/builds", "get", "component", "string") in query
    # every reference resolves
    text = str(doc)
    for name in {part.split("'")[0] for part in text.split("#/components/schemas/")[1:]}:
        assert name in schemas


@pytest.mark.asyncio
async def test_the_page_and_its_files_are_served_from_the_package(
    client: httpx.AsyncClient,
) -> None:
    page = await client.get("/")
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    assert "default-src 'self'" in page.headers["content-security-policy"]
    assert "set-cookie" not in page.headers  # the cookie came once, from the printed address
    for name in ("app.js", "style.css"):
        got = await client.get(f"/static/{name}")
        assert got.status_code == 200 and got.content
    js = (await client.get("/static/app.js")).text
    assert "innerHTML" not in js and "http://" not in js and "https://" not in js
    for bad in (
        "../__init__.py",
        "..%2F__init__.py",
        "index.html",
        ".hidden.js",
        "nope.js",
        "a%00b.js",
        "x" * 300 + ".js",
        "%0A.js",
    ):
        got = await client.get(f"/static/{bad}")
        assert got.status_code == 404, (bad, got.text)
        assert got.json()["exit"] == 1 and "\n" not in got.json()["error"]


@pytest.mark.asyncio
async def test_unknown_routes_and_methods_answer_json(client: httpx.AsyncClient) -> None:
    for method, path, status in (
        ("GET", "/api/nope", 404),
        ("GET", "/nope", 404),
        ("POST", "/api/nope", 404),
        ("PUT", "/api/backends", 405),
        ("DELETE", "/api/catalog", 405),
        ("POST", "/", 405),
    ):
        got = await client.request(method, path)
        assert got.status_code == status, (method, path, got.text)
        assert got.headers["content-type"] == "application/json"
        assert set(got.json()) == {"error", "exit"} and got.json()["exit"] == 1
        assert "server" not in got.headers  # uvicorn does not name itself
    assert "PUT is not allowed" in (await client.put("/api/backends")).json()["error"]


# --- changes and their errors --------------------------------------------------------------


@pytest.mark.asyncio
async def test_registry_and_model_changes_and_errors_in_the_cli_words(
    client: httpx.AsyncClient, setup: Setup, tmp_path: Path
) -> None:
    exe = tmp_path / "opt" / "other-server"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    added = await client.post(
        "/api/backends", json={"id": "other", "kind": "llama", "path": str(exe)}
    )
    assert added.status_code == 200, added.text
    assert added.json()["id"] == "other" and added.json()["message"] == 'added backend row "other"'
    starred = await client.post("/api/backends/other/default", json={})
    assert starred.status_code == 200 and starred.json()["default"] is True
    rows = (await client.get("/api/backends")).json()
    assert [r["id"] for r in rows if r["default"]] == ["other"]

    pinned = await client.post("/api/models/qwen3-8b-q4_k_m/pin", json={"row": "llama-src"})
    said = pinned.json()
    assert said.pop("changes")["config"] == str(setup.config)  # issue 33, as the CLI says it
    assert said == {
        "model": "qwen3-8b-q4_k_m",
        "backend": "llama-src",
        "message": 'pinned "qwen3-8b-q4_k_m" to "llama-src"',
        "changed": True,
    }
    assert "backend: llama-src" in setup.config.read_text()
    shown = (await client.get("/api/models")).json()[0]
    assert shown["backend"]["id"] == "llama-src" and "pinned" in shown["backend"]["reason"]

    set_ = await client.post("/api/models/qwen3-8b-q4_k_m/set", json={"values": {"ctx": "8192"}})
    assert set_.status_code == 200 and set_.json()["ctx"] == 8192
    argv = (await client.get("/api/models/qwen3-8b-q4_k_m/cmd")).json()["argv"]
    assert argv[argv.index("-c") + 1] == "8192"
    unset = await client.post("/api/models/qwen3-8b-q4_k_m/unset", json={"keys": ["ctx"]})
    assert unset.status_code == 200 and "ctx" not in unset.json()
    unpinned = await client.post("/api/models/qwen3-8b-q4_k_m/unpin", json={})
    assert unpinned.json()["backend"] is None

    removed = await client.request("DELETE", "/api/backends/other")
    assert removed.status_code == 200 and removed.json()["removed"] is True

    # errors: the status says what kind, the body says it as the CLI does
    before = setup.config.read_bytes()
    model, q = "/api/models/qwen3-8b-q4_k_m", "qwen3-8b-q4_k_m"
    cases = [
        ("POST", f"{model}/pin", {"row": "nope"}, 404, ["pin", q, "nope"]),
        ("POST", f"{model}/set", {"values": {"ctz": "1"}}, 422, ["set", q, "ctz=1"]),
        ("POST", f"{model}/set", {"values": {"ctx": "-5"}}, 422, ["set", q, "ctx=-5"]),
        ("POST", "/api/builds/llama-server@b1-cpu/activate", {}, 404,
         ["activate", "llama-server@b1-cpu"]),
        ("DELETE", "/api/builds/llama-server", None, 422, ["uninstall", "llama-server"]),
        ("DELETE", "/api/backends/nope", None, 404, ["backends", "remove", "nope"]),
        ("POST", "/api/backends", {"id": "x", "kind": "llama", "path": "/no/such"}, 409,
         ["backends", "add", "x", "--kind", "llama", "--path", "/no/such"]),
        ("GET", "/api/models/nope/cmd", None, 404, ["cmd", "nope"]),
        ("GET", "/api/releases/nope", None, 404, ["releases", "nope"]),
        ("POST", "/api/builds", {"component": "nope"}, 404, ["install", "nope"]),
        ("POST", "/api/builds", {"component": "llama-server", "variant": "vulcan"}, 404,
         ["install", "llama-server", "--variant", "vulcan"]),
    ]  # fmt: skip
    for method, path, body, status, argv in cases:
        got = await client.request(method, path, json=body)
        assert got.status_code == status, (path, got.text)
        assert (await client.get("/api/jobs")).json() == []  # refused before any job started
        shown = await run_in_worker(*argv)  # the CLI's main(), in this process
        # what was typed wrong (a value, a key, a row, a build, a component) is 2; a path that
        # is not there for "backends add" (the world) is refused: 1 (issue 33)
        usage = got.status_code != 409
        assert shown.code == got.json()["exit"] == (2 if usage else 1), shown
        last = shown.err.strip().splitlines()[-1]  # after any progress line
        assert last == f"error: {got.json()['error']}", (path, shown.err)
    assert setup.config.read_bytes() == before


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("body", "wants"),
    [
        (b"{not json", "not JSON"),
        (b'{"row": 5}', "row: input should be a valid string"),
        (b'{"row": "a", "evil": 1}', "evil: extra inputs are not permitted"),
        (b'{"row": "' + b"a" * (70 << 10) + b'"}', "larger than 64 KiB"),
        (b"[]", "input should be a valid dictionary"),
        (b"[" * 30000, "the request body is not JSON"),
        (b'{"row": ' + b"[" * 30000 + b"]" * 30000 + b"}", "the request body is not JSON"),
    ],
)
async def test_a_malformed_body_is_a_usage_error_and_changes_nothing(
    client: httpx.AsyncClient, setup: Setup, body: bytes, wants: str
) -> None:
    before = setup.config.read_bytes()
    got = await client.post(
        "/api/models/qwen3-8b-q4_k_m/pin",
        content=body,
        headers={"content-type": "application/json"},
    )
    assert got.status_code == 422
    assert wants in got.json()["error"] and got.json()["exit"] == 2
    assert setup.config.read_bytes() == before


# --- install jobs --------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_an_install_job_streams_its_progress_and_ends_with_the_result(
    mirror: MirrorServer, mirror_root: Path, client: httpx.AsyncClient, setup: Setup
) -> None:
    data = big_release(mirror_root, "b100")
    mirror.throttle = 6 << 20
    job = await install(client, version="b100")
    events = await sse(client, job["id"])
    assert phases(events) == [*ORDER, "done"]
    ticks = [e for e in events if e["phase"] == "downloading" and not e["message"]]
    assert ticks[-1]["bytes"] == ticks[-1]["total"] == len(data)
    assert all(set(e) >= {"phase", "bytes", "total", "rate", "message"} for e in events)
    done = events[-1]
    assert done["id"] == "llama-server@b100-vulkan" and done["activated"] is True
    assert done["message"].startswith("installed llama-server@b100-vulkan and activated it")
    state = (await client.get(f"/api/jobs/{job['id']}")).json()
    assert state["state"] == "done" and state["result"]["id"] == done["id"]
    # the stream can be read again after the end (a page that reloads), from the start
    again = await sse(client, job["id"])
    assert phases(again) == phases(events)
    (build,) = (await client.get("/api/builds")).json()
    assert build["id"] == "llama-server@b100-vulkan" and build["activated"]
    assert Path(build["path"]).is_file()


@pytest.mark.asyncio
async def test_a_failed_install_ends_its_stream_with_the_error(
    mirror: MirrorServer, mirror_root: Path, client: httpx.AsyncClient
) -> None:
    publish_llama(mirror_root, "b100", fail=True)
    job = await install(client, version="b100")
    events = await sse(client, job["id"])
    assert events[-1]["phase"] == "failed" and [e["phase"] for e in events].count("failed") == 1
    assert "Illegal instruction" in events[-1]["error"] and events[-1]["exit"] == 1
    state = (await client.get(f"/api/jobs/{job['id']}")).json()
    assert state["state"] == "failed" and state["error"]["error"] == events[-1]["error"]
    assert (await client.get("/api/builds")).json() == []
    unknown = await install(client, version="b999")
    failed = (await sse(client, unknown["id"]))[-1]
    assert failed["phase"] == "failed" and "b999" in failed["error"]


@pytest.mark.asyncio
async def test_cancelling_a_job_mid_download_keeps_the_part_and_the_old_state(
    mirror: MirrorServer, mirror_root: Path, client: httpx.AsyncClient, setup: Setup
) -> None:
    data = big_release(mirror_root, "b100")
    await client.post("/api/generate", json={})
    before = setup.config.read_bytes()
    mirror.throttle = 512 << 10
    job = await install(client, version="b100")
    seen = await sse(client, job["id"], until=lambda e: e["bytes"] > 256 << 10)
    assert seen[-1]["phase"] == "downloading"
    cancelled = await client.request("DELETE", f"/api/jobs/{job['id']}")
    assert cancelled.status_code == 200 and cancelled.json()["state"] == "cancelled"
    rest = await sse(client, job["id"])
    assert [e["phase"] for e in rest if e["phase"] in ("done", "failed", "cancelled")] == [
        "cancelled"
    ]
    (part,) = (setup.home / "downloads").glob("*.part")
    assert 0 < part.stat().st_size < len(data)
    assert (await client.get("/api/builds")).json() == []
    assert setup.config.read_bytes() == before
    assert (await client.get("/api/doctor")).json()["ok"] is True
    again = await client.request("DELETE", f"/api/jobs/{job['id']}")
    assert again.status_code == 409
    assert again.json()["error"] == f'job "{job["id"]}" already finished (cancelled)'
    assert (await client.request("DELETE", "/api/jobs/nope")).status_code == 404

    # the next install resumes from the part
    mirror.throttle = None
    mirror.requests.clear()
    again = await install(client, version="b100")
    assert (await sse(client, again["id"]))[-1]["phase"] == "done"
    (headers,) = [h for p, h in mirror.requests if p.startswith("/download/")]
    assert int(headers["Range"].removeprefix("bytes=").rstrip("-")) > 0


@pytest.mark.asyncio
async def test_two_installs_run_at_once(
    mirror: MirrorServer, mirror_root: Path, client: httpx.AsyncClient
) -> None:
    big_release(mirror_root, "b100")
    big_release(mirror_root, "b101")
    mirror.throttle = 3 << 20
    first = await install(client, version="b100")
    second = await install(client, version="b101")
    jobs = (await client.get("/api/jobs")).json()
    assert {j["id"] for j in jobs if j["state"] == "running"} == {first["id"], second["id"]}
    ends = await asyncio.gather(sse(client, first["id"]), sse(client, second["id"]))
    assert [e[-1]["phase"] for e in ends] == ["done", "done"]
    builds = (await client.get("/api/builds")).json()
    assert sorted(b["id"] for b in builds) == [
        "llama-server@b100-vulkan",
        "llama-server@b101-vulkan",
    ]
    assert (await client.get("/api/doctor")).json()["ok"] is True


@pytest.mark.asyncio
async def test_the_cli_and_the_server_side_by_side(
    mirror: MirrorServer, mirror_root: Path, client: httpx.AsyncClient, setup: Setup
) -> None:
    """The same build installed by the server and by the CLI at once: the build lock makes
    one wait for the other; then a change made by the CLI shows on the page's next read."""
    big_release(mirror_root, "b100")
    publish_llama(mirror_root, "b90")
    mirror.throttle = 1 << 20
    job = await install(client, version="b100")
    await sse(client, job["id"], until=lambda e: e["phase"] == "downloading" and e["bytes"] > 0)
    shown = await asyncio.to_thread(cli, "--json", "install", "llama-server", "b100")
    events = await sse(client, job["id"])
    assert events[-1]["phase"] == "done", events[-1]
    assert shown.returncode == 0, shown.stderr
    assert "another backendmgr" in shown.stdout + shown.stderr or '"already_installed": true' in (
        shown.stdout
    )
    (build,) = (await client.get("/api/builds")).json()
    assert build["id"] == "llama-server@b100-vulkan"

    assert cli("install", "llama-server", "b90", "--activate").returncode == 0
    builds = {b["id"]: b["activated"] for b in (await client.get("/api/builds")).json()}
    assert builds == {"llama-server@b100-vulkan": False, "llama-server@b90-vulkan": True}
    activated = await client.post("/api/builds/llama-server@b100-vulkan/activate", json={})
    assert activated.status_code == 200
    listed = cli("--json", "list")
    assert '"activated": true' in listed.stdout
    assert cli("--json", "which", "llama-server").stdout.count("b100") >= 1
    gone = await client.request("DELETE", "/api/builds/llama-server@b90-vulkan")
    assert gone.status_code == 200 and gone.json()["ids"] == ["llama-server@b90-vulkan"]
    assert "b90" not in cli("list").stdout


@pytest.mark.asyncio
async def test_hostile_ids_in_the_path_are_names_never_paths(
    client: httpx.AsyncClient, setup: Setup, tmp_path: Path
) -> None:
    """An id is looked up or stored as a name, as the CLI does; nothing is read or written
    outside the configured files, and a control character never reaches an error line."""
    from backendmgr.config.snapshot import snapshot_path

    snapshot = snapshot_path(tmp_path / "cfg" / "config.yaml")  # the config's, by its name

    def outside_files() -> list[Path]:
        return sorted(p for p in tmp_path.rglob("*") if "home" not in p.parts and p != snapshot)

    outside = outside_files()
    for model in ("..%2F..%2Fetc%2Fpasswd", "a%00b", "x" * 600):
        got = await client.get(f"/api/models/{model}/cmd")
        assert got.status_code == 404, (model, got.text)
        assert "\n" not in got.json()["error"] and "\x00" not in got.json()["error"]
    for build in ("..%2F..%2Fetc", "llama-server@..%2F..%2Fx", "llama-server@%0A"):
        got = await client.request("DELETE", f"/api/builds/{build}")
        assert got.status_code in (404, 422), got.text
        got = await client.post(f"/api/builds/{build}/activate", json={})
        assert got.status_code in (404, 422), got.text
    got = await client.get("/api/releases/..%2F..%2Fetc")
    assert got.status_code == 404
    assert (await client.get("/api/jobs/..%2F..")).status_code == 404
    assert (await client.get("/api/which/..%2F..%2Fetc%2Fpasswd")).status_code == 404
    assert outside_files() == outside


@pytest.mark.asyncio
async def test_lock_sync_and_verify_over_the_api(
    mirror: MirrorServer, mirror_root: Path, client: httpx.AsyncClient, setup: Setup
) -> None:
    """The commands added after the first API round answer over HTTP too, as the CLI does."""
    big_release(mirror_root, "b100")
    await sse(client, (await install(client, version="b100"))["id"])
    locked = await client.post("/api/lock")
    assert locked.status_code == 200, locked.text
    body = locked.json()
    assert body["builds"] == ["llama-server@b100-vulkan"] and body["changed"] is True
    assert Path(body["path"]) == setup.config.parent / "backendmgr.lock"
    assert (await client.post("/api/lock")).json()["changed"] is False  # same builds, same bytes
    job = await client.post("/api/sync", json={"locked": True})
    assert job.status_code == 202, job.text
    end = (await sse(client, job.json()["id"]))[-1]
    assert end["phase"] == "done" and "nothing to do" in end["message"], end
    # the manual row's stand-in prints a version and exits: verify says why it failed
    started = await client.post("/api/verify", json={"models": ["qwen3-8b-q4_k_m"], "timeout": 5})
    assert started.status_code == 202, started.text
    assert started.json()["kind"] == "verify" and started.json()["state"] == "running"
    events = await sse(client, started.json()["id"])
    assert [e["phase"] for e in events] == ["verifying", "verified", "done"], events
    assert events[0]["asset"] == "qwen3-8b-q4_k_m"
    assert events[1]["message"] == "qwen3-8b-q4_k_m: failed: exited with status 0: version: 1 (b1)"
    report = events[-1]
    assert report["message"] == "1 model(s) verified: 1 failed"
    (result,) = report["results"]
    assert report["failed"] == 1 and events[1]["result"] == result
    assert result["id"] == "qwen3-8b-q4_k_m" and result["backend"] == "llama-src"
    assert result["ok"] is False and result["reason"] == "exited with status 0: version: 1 (b1)"
    state = (await client.get(f"/api/jobs/{started.json()['id']}")).json()
    assert state["state"] == "done" and state["result"]["results"] == [result]
    # an unknown model fails the job in the CLI's words
    bad = await client.post("/api/verify", json={"models": ["qwen3-8b"], "timeout": 5})
    assert bad.status_code == 202
    failed = (await sse(client, bad.json()["id"]))[-1]
    assert failed["phase"] == "failed" and "did you mean qwen3-8b-q4_k_m" in failed["error"]
