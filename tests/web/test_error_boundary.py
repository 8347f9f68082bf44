"""One error boundary (issue 19): every failure is one line on the CLI (its exit status per
class) and the same line as ``{"error", "exit"}`` with the class's HTTP status on the API,
never a traceback, "internal error" or pydantic's dump. Through the real CLI, the real server
and the real loopback mirror (which also serves a PEP 691 package index)."""

from __future__ import annotations

import asyncio
import json
import socket
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from pydantic import BaseModel, ValidationError

from backendmgr import errors as e
from backendmgr.boundary import failure_of
from backendmgr.mirror import MirrorHandler, MirrorServer
from tests.support import Setup, publish_llama
from tests.support.cli import CliResult
from tests.support.web import sse

Cli = Callable[..., CliResult]
PEP691 = "application/vnd.pypi.simple.v1+json"


async def run(cli: Cli, *args: str) -> CliResult:
    """The in-process CLI from an async test: in a thread, as it runs its own event loop."""
    return await asyncio.to_thread(cli, *args)


def error_line(result: CliResult, code: int = 1) -> str:
    """The text of the one ``error:`` line of a failed command."""
    assert result.code == code, result
    assert "Traceback" not in result.err and "For further information" not in result.err
    errors = [line for line in result.err.splitlines() if line.startswith("error")]
    assert len(errors) == 1, result.err
    return errors[0].removeprefix("error: ")


async def api_error(response: httpx.Response, status: int, code: int = 1) -> str:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error", "exit"} and body["exit"] == code, body
    assert "\n" not in body["error"] and not body["error"].startswith("internal error")
    message: str = body["error"]
    return message


async def job_error(client: httpx.AsyncClient, path: str, body: object) -> tuple[str, int]:
    """Start a job; it must end failed: its ``(error, exit)``."""
    started = await client.post(path, json=body)
    assert started.status_code == 202, started.text
    events = await sse(client, started.json()["id"])
    assert events[-1]["phase"] == "failed", events[-1]
    return events[-1]["error"], events[-1]["exit"]


# --- the table --------------------------------------------------------------------------------


def test_every_error_class_carries_its_exit_status_and_http_status() -> None:
    table = {
        e.BackendmgrError: (1, 500),
        e.InvalidInput: (2, 422),
        e.ConfigError: (1, 422),
        e.UsageError: (2, 422),
        e.MalformedId: (2, 422),
        e.NotFound: (1, 404),
        e.Unknown: (2, 404),
        e.Refused: (1, 409),
        e.NetworkError: (1, 502),
        e.VerificationError: (1, 502),
        e.UnsafeArchive: (1, 502),
        e.InstallFailed: (1, 500),
        e.Cancelled: (130, 409),
    }
    for kind, (code, status) in table.items():
        assert (kind.exit_code, kind.http_status) == (code, status), kind
        assert failure_of(kind("said\nonce")) == ("said\\nonce", code, status)


def test_other_exceptions_are_one_line_too() -> None:
    class Model(BaseModel):
        ctx: int

    with pytest.raises(ValidationError) as caught:
        Model.model_validate({"ctx": "x\ny"})
    group = BaseExceptionGroup("g", [asyncio.CancelledError(), e.NotFound("no build b1")])
    nested = ExceptionGroup("outer", [ExceptionGroup("inner", [OSError(28, "No space", "/d")])])
    url = httpx.URL("http://127.0.0.1:9/x")
    timeout = httpx.ReadTimeout("timed out", request=httpx.Request("GET", url))
    cases = {
        "no build b1": group,
        "No space (/d)": nested,
        "ctx: Input should be a valid integer, unable to parse string as an integer": caught.value,
        "127.0.0.1:9 did not answer within 30 s (read timeout)": timeout,
        "timed out": TimeoutError(),
        "cancelled": KeyboardInterrupt(),
        "internal error: ZeroDivisionError": ZeroDivisionError("x"),
    }
    for expected, exc in cases.items():
        failure = failure_of(exc)
        assert expected in failure.message, (failure, exc)
        assert "\n" not in failure.message and failure.message.count("For further") == 0


def test_a_ctrl_c_python_wrapped_while_a_class_was_made_is_a_cancel() -> None:
    """A Ctrl-C that lands in a ``__set_name__`` (anyio's backend defines its classes as it is
    imported, on the first event loop) reaches us as the RuntimeError Python wraps it in."""

    class Field:
        def __set_name__(self, owner: type, name: str) -> None:
            raise KeyboardInterrupt

    with pytest.raises(RuntimeError) as caught:
        type("Made", (), {"field": Field()})
    assert isinstance(caught.value.__cause__, KeyboardInterrupt)
    assert failure_of(caught.value) == ("cancelled", 130, e.Cancelled.http_status)
    grouped = BaseExceptionGroup("g", [e.NotFound("later"), caught.value])
    assert failure_of(grouped).message == "cancelled"
    assert failure_of(RuntimeError("no Ctrl-C behind it")).message == "internal error: RuntimeError"


def test_a_cancel_is_told_without_importing_asyncio(monkeypatch: pytest.MonkeyPatch) -> None:
    """A Ctrl-C that lands while asyncio first imports leaves it half made in sys.modules: the
    boundary must not import it again (that raised NameError, an internal error)."""
    import types

    monkeypatch.setitem(sys.modules, "asyncio", types.ModuleType("asyncio"))  # half made
    assert failure_of(KeyboardInterrupt()) == ("cancelled", 130, e.Cancelled.http_status)
    assert failure_of(ValueError("x")).message == "internal error: ValueError"


# --- a package index that stalls or answers garbage -------------------------------------------


@pytest.fixture
def silent_index(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A package index that accepts connections and never answers; a 1 s read timeout."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/simple"
    monkeypatch.delenv("BACKENDMGR_OFFLINE", raising=False)
    monkeypatch.setenv("PIP_INDEX_URL", url)
    monkeypatch.setenv("BACKENDMGR_TIMEOUT", "1")
    try:
        yield url
    finally:
        sock.close()


@pytest.mark.asyncio
async def test_a_package_index_timeout_is_one_line(
    silent_index: str, cli: Cli, client: httpx.AsyncClient
) -> None:
    line = error_line(await run(cli, "releases", "vllm"))
    assert line.startswith(f"cannot reach the package index {silent_index} ")
    assert line.endswith("did not answer within 1 s (read timeout))")
    said = await api_error(await client.get("/api/releases/vllm"), 502)
    assert said == line
    assert error_line(await run(cli, "install", "vllm", "--dry-run")) == line


@pytest.fixture
def garbled_index(mirror: MirrorServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[bytes]]:
    """The mirror also serves ``/simple/vllm/`` with whatever body the test puts first."""
    bodies: list[bytes] = []

    def serve(handler: MirrorHandler) -> bool:
        if handler.route != "/simple/vllm/":
            return False
        handler.send_response(200)
        handler.send_header("Content-Type", PEP691)
        handler.send_header("Content-Length", str(len(bodies[0])))
        handler.end_headers()
        handler.wfile.write(bodies[0])
        return True

    mirror.hooks.append(serve)
    monkeypatch.setenv("PIP_INDEX_URL", f"{mirror.base_url}/simple")
    yield bodies


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("body", "said"),
    [
        (b"<html>not JSON", "sent invalid JSON for vllm"),
        (b"[" * 100_000, "sent invalid JSON for vllm"),
        (b'{"files": {"a": 1}}', "sent a page without a list of files for vllm"),
        (b'"files"', "sent a page without a list of files for vllm"),
    ],
)
async def test_a_non_json_index_answer_is_one_line(
    garbled_index: list[bytes], cli: Cli, client: httpx.AsyncClient, body: bytes, said: str
) -> None:
    garbled_index.append(body)
    line = error_line(await run(cli, "releases", "vllm"))
    assert line.startswith("the package index http://127.0.0.1:") and line.endswith(said)
    assert await api_error(await client.get("/api/releases/vllm"), 502) == line


@pytest.mark.asyncio
async def test_an_index_page_lists_versions_without_the_github_token(
    garbled_index: list[bytes],
    mirror: MirrorServer,
    cli: Cli,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_secret")  # the mirror is also the GitHub API here
    files = [{"filename": f"vllm-{v}-py3-none-any.whl"} for v in ("0.9.0", "0.10.0")]
    files.append({"filename": "vllm-" + "1" * 300 + "-py3-none-any.whl"})  # too long to use
    garbled_index.append(json.dumps({"files": files}).encode())
    result = await run(cli, "--json", "releases", "vllm")
    assert result.code == 0, result
    assert [r["tag"] for r in json.loads(result.out)] == ["0.10.0", "0.9.0"]
    sent = [h for p, h in mirror.requests if p.startswith("/simple/")]
    assert sent and all("Authorization" not in h for h in sent)


# --- a pydantic error in an input file ---------------------------------------------------------


def bad_config(config: Path) -> tuple[Path, str]:
    lines = config.read_text().count("\n")
    config.write_text(config.read_text() + "ttl: soon\n")
    return config, f" line {lines + 1}: ttl: Input should be a valid integer"


def bad_manifest(config: Path) -> tuple[Path, str]:
    path = config.parent / "manifests" / "mine.yaml"
    path.parent.mkdir(exist_ok=True)
    path.write_text("id: mine\nlabel: Mine\nsource: {pypi: [1, 2]}\n")
    return path, ": field source"


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("spoil", "words", "where"),
    [(bad_config, ("backends",), "/api/backends"), (bad_manifest, ("catalog",), "/api/catalog")],
    ids=["config", "manifest"],
)
async def test_an_invalid_input_file_is_one_line_naming_file_and_field(
    cli: Cli,
    client: httpx.AsyncClient,
    config_path: Path,
    spoil: Callable[[Path], tuple[Path, str]],
    words: tuple[str, ...],
    where: str,
) -> None:
    path, field = spoil(config_path)
    line = error_line(await run(cli, *words))
    assert str(path) in line and field in line.removeprefix("manifest ").removeprefix(str(path))
    assert await api_error(await client.get(where), 422) == line


@pytest.mark.asyncio
async def test_an_invalid_lock_file_is_one_line_naming_file_and_field(
    cli: Cli, client: httpx.AsyncClient, config_path: Path
) -> None:
    lock = config_path.parent / "backendmgr.lock"
    lock.write_text("format: 1\nbuilds:\n  - component: llama-server\n    version: [1]\n")
    line = error_line(await run(cli, "sync"))
    assert line.startswith(f"{lock}: builds[0]")
    assert await job_error(client, "/api/sync", {}) == (line, 1)


@pytest.mark.asyncio
async def test_a_garbled_capabilities_cache_entry_reads_as_unknown(
    cli: Cli, client: httpx.AsyncClient, setup: Setup
) -> None:
    st = setup.manual_exe.stat()
    cache = setup.home / "cache" / "capabilities.json"
    cache.parent.mkdir(parents=True, exist_ok=True)
    entry = [st.st_size, st.st_mtime_ns, {"tools": "yes", "ctx": [1]}]
    cache.write_text(json.dumps({"format": 1, "entries": {str(setup.manual_exe): entry}}))
    result = await run(cli, "--json", "backends")
    assert result.code == 0 and "Traceback" not in result.err, result
    answer = await client.get("/api/backends")
    assert answer.status_code == 200 and answer.json() == json.loads(result.out)


# --- a redirect to a non-HTTP URL ---------------------------------------------------------------


def to_data(handler: MirrorHandler) -> bool:
    """Redirect the request to a ``data:`` URL."""
    handler.send_response(302)
    handler.send_header("Location", "data:text/plain;base64,aGVsbG8=")
    handler.send_header("Content-Length", "0")
    handler.end_headers()
    return True


@pytest.mark.asyncio
async def test_a_download_redirected_to_data_is_one_line(
    mirror: MirrorServer, mirror_root: Path, cli: Cli, client: httpx.AsyncClient, tmp_path: Path
) -> None:
    publish_llama(mirror_root, "b100")
    mirror.hooks.append(lambda h: h.route.startswith("/download/") and to_data(h))
    line = error_line(await run(cli, "install", "llama-server"))
    assert line.endswith("redirected to a URL that is not http(s); refusing it")
    folder = tmp_path / "home" / "builds" / "llama-server"
    assert sorted(p.name for p in folder.iterdir()) == []
    assert await job_error(client, "/api/builds", {"component": "llama-server"}) == (line, 1)


@pytest.mark.asyncio
async def test_a_listing_redirected_to_data_is_one_line(
    mirror: MirrorServer, cli: Cli, client: httpx.AsyncClient
) -> None:
    mirror.hooks.append(lambda h: h.route.startswith("/repos/") and to_data(h))
    line = error_line(await run(cli, "releases", "llama-server"))
    assert line.startswith("127.0.0.1:") and "redirected to a URL that is not http(s)" in line
    assert await api_error(await client.get("/api/releases/llama-server"), 502) == line


# --- hostile tags on the API --------------------------------------------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize("tag", ["b1\nevil: true", "b1\u202egpj.exe", "b" + "9" * 199])
async def test_the_api_refuses_a_hostile_version_before_any_job(
    mirror: MirrorServer, mirror_root: Path, client: httpx.AsyncClient, tag: str
) -> None:
    publish_llama(mirror_root, "b100")
    body = {"component": "llama-server", "version": tag}
    if len(tag) < 100:
        said = await api_error(await client.post("/api/builds", json=body), 422, 2)
        assert said.startswith('version: release tag "b1') and "control character" in said
    else:  # the longest version the API takes names nothing: a failed job, one line
        said, code = await job_error(client, "/api/builds", body)
        assert code == 1 and "\n" not in said
    assert (await client.get("/api/jobs")).json() == [] or len(tag) >= 100
