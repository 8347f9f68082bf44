"""``verify`` against a real server program the tests write (issue 11 part 2): one HTTP server
on the emitted port that answers ``/health``, chat, embeddings and rerank, and can be told (by
its own arguments, so through the model's ``extra_args``) to crash at start, never become
healthy, answer 500, ignore SIGTERM, or start a child of its own as vLLM does."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

import anyio
import pytest

from backendmgr.config.paths import Paths
from backendmgr.manager import Manager
from backendmgr.requests import SetRequest, VerifyRequest
from backendmgr.serve_check import check_command
from tests.support import await_until, wait_until
from tests.support.cli import CliResult, run_in_process, spawn_backendmgr
from tests.support.ggufs import QWEN3_8B, write_gguf, write_hf
from tests.support.processes import recorded_pids, running
from tests.support.standins import NVIDIA_SMI, python_exe
from tests.support.standins import SERVER_STANDIN as SERVER

MIB = 1 << 20


def pids(fake: Path) -> list[int]:
    path = fake / "pids"
    return [int(x) for x in path.read_text().split()] if path.exists() else []


def gone_soon(pid: int) -> bool:
    """A killed grandchild is reaped by init a moment later (a zombie does not count)."""
    try:
        wait_until(lambda: not running(pid), f"process {pid} ended", timeout=10)
    except AssertionError:
        return False
    return True


@pytest.fixture
def fakes(tmp_path: Path, config_path: Path) -> dict[str, Path]:
    fake = tmp_path / "fake"
    fake.mkdir()
    server = python_exe(tmp_path / "bin" / "llama-server", SERVER)
    vllm = python_exe(tmp_path / "bin" / "vllm", SERVER)
    root = tmp_path / "models"
    write_gguf(root / "chat.gguf", "qwen3", layers=4, ctx=8192, size_bytes=MIB)
    write_gguf(root / "embed.gguf", "bert", layers=4, ctx=512, pooling=1, size_bytes=MIB)
    write_gguf(root / "rank.gguf", "bert", layers=4, ctx=512, pooling=4, size_bytes=MIB)
    write_hf(root / "hfchat", QWEN3_8B)
    config_path.parent.mkdir(parents=True, exist_ok=True)
    config_path.write_text(
        f"models_dirs: [{json.dumps(str(root))}]\n"
        "backends:\n"
        f"  - {{id: fake-llama, kind: llama, path: {json.dumps(str(server))}}}\n"
        f"  - {{id: fake-vllm, kind: vllm, path: {json.dumps(str(vllm))}}}\n"
        "models:\n"
        "  hfchat-bf16: {extra_args: '--fake-child 1'}\n"
    )
    return {"fake": fake, "bin": tmp_path / "bin", "config": config_path}


def bm(fakes: dict[str, Path], *args: str, path: str | None = None) -> CliResult:
    """``backendmgr ARGS`` in this process, with the stand-ins' FAKE_DIR (and ``path``) set."""
    with pytest.MonkeyPatch.context() as env:
        env.setenv("FAKE_DIR", str(fakes["fake"]))
        if path is not None:
            env.setenv("PATH", path)
        result = run_in_process(*args)
    assert "Traceback" not in result.err, result.err
    return result


def set_extra(fakes: dict[str, Path], model: str, extra: str) -> None:
    result = bm(fakes, "set", model, f"extra_args={extra}", "--no-generate")
    assert result.code == 0, result


def test_every_role_and_vllm_are_verified_and_shown_by_models(fakes: dict[str, Path]) -> None:
    # a fake nvidia-smi reports 6462 MiB for each process of the group
    python_exe(fakes["bin"] / "nvidia-smi", NVIDIA_SMI)
    path = f"{fakes['bin']}:{os.environ['PATH']}"
    before = bm(fakes, "models")
    assert before.code == 0 and "not verified" in before.out
    result = bm(fakes, "verify", "--json", path=path)
    assert result.code == 0, result
    doc = json.loads(result.out)
    assert doc["failed"] == 0
    by_id = {r["id"]: r for r in doc["results"]}
    assert sorted(by_id) == ["chat", "embed", "hfchat-bf16", "rank"]
    for r in by_id.values():
        assert r["ok"] is True and r["reason"] is None
        assert 0 < r["ready_s"] < 60
        assert isinstance(r["est_vram_gb"], float)
    assert by_id["chat"]["gpu_gib"] == round(6462 / 1024, 3)
    assert by_id["hfchat-bf16"]["gpu_gib"] == round(2 * 6462 / 1024, 3)  # vllm and its engine
    requests = [
        json.loads(line) for line in (fakes["fake"] / "requests").read_text().split("\n")[:-1]
    ]
    paths = sorted(p for p, _ in requests)
    assert paths == sorted(
        ["/v1/chat/completions", "/v1/chat/completions", "/v1/embeddings", "/v1/rerank"]
    )
    chats = [req for p, req in requests if p == "/v1/chat/completions"]
    assert all(req["max_tokens"] == 4 for req in chats)
    assert {req["model"] for req in chats} == {"chat", "hfchat-bf16"}
    started = pids(fakes["fake"])
    assert len(started) == 5  # four servers and the vllm engine child
    assert not [p for p in started if not gone_soon(p)]
    # models shows the result beside the estimate, in text and JSON
    shown = bm(fakes, "--json", "models")
    rows = {r["id"]: r for r in json.loads(shown.out)}
    assert rows["chat"]["verified"]["ok"] is True
    assert rows["chat"]["verification"] == "verified today: ok in {:.1f} s, 6.31 GiB".format(
        by_id["chat"]["ready_s"]
    )
    text = bm(fakes, "models").out
    assert "verified today: ok in" in text and "6.31 GiB (est " in text
    # a changed command is "not verified" again; the others keep their result
    set_extra(fakes, "chat", "--threads 4")
    rows = {r["id"]: r for r in json.loads(bm(fakes, "--json", "models").out)}
    assert rows["chat"]["verified"] is None and rows["chat"]["verification"] == "not verified"
    assert rows["embed"]["verified"]["ok"] is True
    # a stored result of the wrong shape (its key still right) reads as not verified
    stored = Path(os.environ["BACKENDMGR_HOME"]) / "verify.json"
    doc = json.loads(stored.read_text())
    doc["entries"]["rank"]["ready_s"] = "fast"
    stored.write_text(json.dumps(doc))
    rows = {r["id"]: r for r in json.loads(bm(fakes, "--json", "models").out)}
    assert rows["rank"]["verification"] == "not verified"
    assert rows["embed"]["verified"]["ok"] is True
    # so is one whose executable changed
    server = fakes["bin"] / "llama-server"
    server.write_text(server.read_text() + "\n# rebuilt\n")
    rows = {r["id"]: r for r in json.loads(bm(fakes, "--json", "models").out)}
    assert rows["embed"]["verification"] == "not verified"


def test_failures_are_reported_and_leave_no_child(fakes: dict[str, Path]) -> None:
    set_extra(fakes, "chat", "--fake-mode crash")
    set_extra(fakes, "embed", "--fake-mode never")
    set_extra(fakes, "rank", "--fake-mode 500")
    result = bm(fakes, "verify", "chat", "embed", "rank", "--timeout", "2", "--keep-going")
    assert result.code == 1
    lines = result.out.splitlines()
    assert lines[0].startswith("chat: failed: exited with status 3: ")
    assert "error: failed to load model '/m/broken.gguf'" in lines[0]
    assert len(lines[0]) < 4000  # the last lines only, each bounded
    assert lines[1] == (  # issue 29: a cause of its own, with the fix
        "embed: failed: not healthy within 2 s; never-healthy: a load slower than 2 s, a "
        "checkEndpoint it does not serve, or a hang; not a memory failure; fix: backendmgr "
        "verify embed --timeout 600"
    )
    assert lines[2].startswith("rank: failed: HTTP 500 from /v1/rerank: ")
    assert "CUDA error: out of memory" in lines[2]
    assert result.err.strip().splitlines()[-1] == (
        "error: 3 of 3 models failed verification: chat, embed, rank"
    )
    started = pids(fakes["fake"])
    assert len(started) == 3
    assert not [p for p in started if not gone_soon(p)]
    shown = {m["id"]: m["verification"] for m in json.loads(bm(fakes, "--json", "models").out)}
    assert shown["embed"] == "verified today: failed (not healthy within 2 s)"
    assert shown["chat"].startswith("verified today: failed (exited with status 3: ")
    assert len(shown["chat"]) < 150  # the table shows a summary; verify's report has the rest
    # without --keep-going the first failure ends the run
    again = bm(fakes, "verify", "--json", "--timeout", "2")
    assert again.code == 1
    doc = json.loads(again.out)
    assert [r["id"] for r in doc["results"]] == ["chat"] and doc["failed"] == 1


def test_bad_input_is_one_error_line(fakes: dict[str, Path]) -> None:
    unknown = bm(fakes, "verify", "chta")
    assert unknown.code == 2
    assert unknown.err.startswith('error: no model "chta" was discovered')
    assert "chat" in unknown.err
    for bad in ("0", "-3", "nan", "1e99", "soon"):
        result = bm(fakes, "verify", "--timeout", bad)
        assert result.code == 2 and "--timeout" in result.err, (bad, result)
    assert pids(fakes["fake"]) == []


def test_checkendpoint_is_followed(fakes: dict[str, Path], config_path: Path) -> None:
    config_path.write_text(
        config_path.read_text()
        + "  chat:\n    extra_args: '--fake-health /ready'\n"
        + "    llama_swap: {checkEndpoint: /ready}\n"
    )
    assert bm(fakes, "verify", "chat").code == 0
    set_extra(fakes, "chat", "--fake-health /elsewhere")  # /ready now answers 404
    result = bm(fakes, "verify", "chat", "--timeout", "1.5")
    assert result.code == 1 and "not healthy within 1.5 s" in result.out


def test_ctrl_c_stops_the_child(fakes: dict[str, Path]) -> None:
    set_extra(fakes, "chat", "--fake-mode never")
    proc = spawn_backendmgr(
        "verify", "chat", "--timeout", "60", env={**os.environ, "FAKE_DIR": str(fakes["fake"])}
    )
    try:
        # the child notes its pid once it runs: verify holds it by then
        (child,) = recorded_pids(fakes["fake"] / "pids", timeout=120, proc=proc)
        assert running(child)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, (out, err)
    assert "error: cancelled" in err and "Traceback" not in err
    assert gone_soon(child)


@pytest.mark.asyncio
async def test_cancel_and_sigterm_ignored_use_sigkill(
    fakes: dict[str, Path], tmp_path: Path
) -> None:
    """Through the async API: a cancelled verify stops its child; one that ignores SIGTERM is
    killed after the grace period."""
    os.environ["FAKE_DIR"] = str(fakes["fake"])
    try:
        server = str(fakes["bin"] / "llama-server")
        argv = [server, "--port", "${PORT}", "--fake-mode", "stubborn", "--fake-child", "1"]
        seen: list[int] = []
        start = time.monotonic()
        result = await check_command(
            argv, role="chat", model_id="x", timeout=30, grace=0.5, on_start=seen.append
        )
        assert result.ok, result
        assert time.monotonic() - start < 20
        assert not [p for p in pids(fakes["fake"]) if not gone_soon(p)]

        (fakes["fake"] / "pids").unlink()
        mgr = Manager(Paths.resolve(config=str(fakes["config"]), home=str(tmp_path / "home")))
        values = {"extra_args": "--fake-mode never --fake-child 1"}
        await mgr.set_overrides(SetRequest(model="chat", values=values, generate=False))
        started: list[int] = []
        async with anyio.create_task_group() as tg:
            tg.start_soon(
                lambda: mgr.verify(
                    VerifyRequest(models=["chat"], timeout=60),
                    on_start=lambda i, p: started.append(p),
                )
            )
            await await_until(
                lambda: len(pids(fakes["fake"])) == 2, "the server and its child started"
            )
            tg.cancel_scope.cancel()
        assert started and len(pids(fakes["fake"])) == 2
        assert not [p for p in pids(fakes["fake"]) if not gone_soon(p)]
    finally:
        del os.environ["FAKE_DIR"]


def test_a_build_installed_from_the_mirror_is_verified(
    mirror: object, mirror_root: Path, tmp_path: Path, config_path: Path
) -> None:
    """The server as a llama.cpp release: installed, adopted as the build row, verified; the
    result is keyed by the build's receipt, so reinstalling it reads "not verified" again."""
    from tests.support import Entry, make_tar, publish

    server = f"#!{sys.executable}\n{SERVER}".encode()
    entries = [
        Entry("build/bin/", kind="dir", mode=0o755),
        Entry("build/bin/llama-server", server, mode=0o755),
        Entry("build/bin/LICENSE", b"MIT\n"),
    ]
    name = "llama-b100-bin-ubuntu-vulkan-x64.tar.gz"
    publish(mirror_root, "ggml-org/llama.cpp", "b100", {name: make_tar(entries)})
    root = tmp_path / "models"
    write_gguf(root / "chat.gguf", "qwen3", layers=4, ctx=8192, size_bytes=MIB)
    config_path.parent.mkdir(parents=True, exist_ok=True)
    config_path.write_text(f"models_dirs: [{json.dumps(str(root))}]\n")
    fake = tmp_path / "fake"
    fake.mkdir()
    fakes = {"fake": fake}
    installed = bm(fakes, "--json", "install", "llama-server")
    assert installed.code == 0, installed
    result = bm(fakes, "--json", "verify")
    assert result.code == 0, result
    (only,) = json.loads(result.out)["results"]
    assert only["id"] == "chat" and only["ok"] and only["backend"] == "llama-server"
    assert not [p for p in pids(fake) if not gone_soon(p)]
    rows = {r["id"]: r for r in json.loads(bm(fakes, "--json", "models").out)}
    assert rows["chat"]["verification"].startswith("verified today: ok in ")
    # the same build reinstalled has a new receipt (installed_at): not verified again
    again = bm(fakes, "--json", "install", "llama-server", "b100", "--reinstall")
    assert again.code == 0, again
    rows = {r["id"]: r for r in json.loads(bm(fakes, "--json", "models").out)}
    assert rows["chat"]["verification"] == "not verified"


@pytest.mark.asyncio
async def test_a_200_that_is_no_json_answer_fails_the_check(fakes: dict[str, Path]) -> None:
    """A server (or a proxy in front of it) that answers the request with an HTML page serves
    nothing: ``verify`` once called that ok."""
    os.environ["FAKE_DIR"] = str(fakes["fake"])
    try:
        server = str(fakes["bin"] / "llama-server")
        argv = [server, "--port", "${PORT}", "--fake-mode", "garbage"]
        result = await check_command(argv, role="chat", model_id="x", timeout=30)
    finally:
        del os.environ["FAKE_DIR"]
    assert not result.ok
    assert result.reason == (
        "HTTP 200 from /v1/chat/completions is no JSON answer: <html>it works</html>"
    )
