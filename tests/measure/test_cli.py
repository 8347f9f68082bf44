"""``verify`` causes, ``verify --repair`` and ``tune`` through the real CLI, against stand-in
servers (tests/support/measure_standins.py) that allocate memory with the context and fail with the
real servers' words."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import CliResult
from tests.support.ggufs import QWEN3_8B, write_gguf, write_hf
from tests.support.measure_standins import write_server
from tests.support.processes import running

MIB = 1 << 20


alive = running  # a zombie counts as gone


def none_left(fake: Path) -> bool:
    path = fake / "pids"
    started = [int(x) for x in path.read_text().split()] if path.exists() else []
    for _ in range(100):
        if not any(alive(p) for p in started):
            return True
        time.sleep(0.02)
    return False


class Setup:
    def __init__(self, tmp_path: Path, config: Path, cli: Callable[..., CliResult]) -> None:
        self.cli = cli
        self.fake = tmp_path / "fake"
        self.fake.mkdir()
        self.bin = tmp_path / "bin"
        self.models = tmp_path / "models"
        self.config = config
        self.home = tmp_path / "home"

    def write_config(
        self, rows: list[dict[str, Any]], models: dict[str, Any] | None = None
    ) -> None:
        self.config.parent.mkdir(parents=True, exist_ok=True)
        doc = {"models_dirs": [str(self.models)], "backends": rows, "models": models or {}}
        self.config.write_text(json.dumps(doc))  # JSON is YAML

    def bm(self, *args: str) -> CliResult:
        result: CliResult = self.cli(*args)  # in this process: the servers are the children
        assert "Traceback" not in result.err, result.err
        return result

    def json(self, *args: str) -> Any:
        result = self.bm("--json", *args)
        return json.loads(result.out)

    def starts(self) -> list[list[Any]]:
        path = self.fake / "starts"
        return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


@pytest.fixture
def s(
    tmp_path: Path,
    config_path: Path,
    cli: Callable[..., CliResult],
    monkeypatch: pytest.MonkeyPatch,
) -> Setup:
    setup = Setup(tmp_path, config_path, cli)
    monkeypatch.setenv("FAKE_DIR", str(setup.fake))
    return setup


def row(s: Setup, row_id: str, kind: str = "llama", **behaviour: Any) -> dict[str, Any]:
    path = write_server(
        s.bin / row_id / ("vllm" if kind == "vllm" else "llama-server"), **behaviour
    )
    return {"id": row_id, "kind": kind, "path": str(path)}


def test_verify_names_each_cause_and_its_fix(s: Setup) -> None:
    for name in ("arch", "lib", "port", "silent", "oom", "fine"):
        write_gguf(s.models / f"{name}.gguf", "qwen3", layers=4, ctx=8192, size_bytes=MIB)
    rows = [
        row(s, "knows-nothing", knows=[]),
        row(s, "no-cuda", fail="lib"),
        row(s, "busy", fail="port"),
        row(s, "mute", fail="silent"),
        row(s, "small", oom_above=4096),
        {**row(s, "good"), "default": True},
    ]
    pins = {"arch": "knows-nothing", "lib": "no-cuda", "port": "busy", "silent": "mute"}
    models = {m: {"backend": r} for m, r in pins.items()} | {"oom": {"backend": "small"}}
    s.write_config(rows, models)
    doc = s.json("verify", "--keep-going", "--timeout", "20")
    by_id = {r["id"]: r for r in doc["results"]}
    assert by_id["fine"]["ok"] is True and by_id["fine"]["cause"] is None
    causes = {m: (r["cause"] or {}).get("code") for m, r in by_id.items()}
    assert causes == {
        "arch": "unknown-architecture",
        "lib": "missing-library",
        "port": "port-in-use",
        "silent": "silent-exit",
        "oom": "out-of-memory",
        "fine": None,
    }
    assert by_id["arch"]["cause"]["line"] == (
        "this build does not know the model's architecture 'arch'"
    )
    assert by_id["arch"]["cause"]["fix"] == "backendmgr catalog"  # hand-made rows: no update
    assert by_id["oom"]["cause"]["fix"] == "backendmgr tune oom"
    assert "libcudart.so.12" in by_id["lib"]["cause"]["line"]
    assert by_id["silent"]["reason"] == "exited with status 1"
    # the text report carries the cause and the fix on the model's line
    text = s.bm("verify", "oom", "--timeout", "20")
    assert text.code == 1
    assert "; out-of-memory: out of memory" in text.out and "fix: backendmgr tune oom" in text.out
    assert none_left(s.fake)


def test_repair_pins_the_failing_model_to_the_build_that_serves_it(s: Setup) -> None:
    write_gguf(s.models / "newarch.gguf", "qwen3", layers=4, ctx=8192, size_bytes=MIB)
    write_gguf(s.models / "plain.gguf", "qwen3", layers=4, ctx=8192, size_bytes=MIB)
    rows = [
        row(s, "old", knows=["plain"]),  # the class's first row: both resolve to it
        row(s, "no-cuda", fail="lib"),
        row(s, "new"),
        row(s, "newer"),
    ]
    s.write_config(rows)
    before = s.config.read_text()
    dry = s.json("verify", "--repair", "--dry-run", "--timeout", "20")
    assert dry["repair"]["dry_run"] is True and dry["repair"]["changed"] is False
    (fixed,) = dry["repair"]["results"]
    assert fixed["id"] == "newarch" and fixed["pinned"] == "new"
    assert s.config.read_text() == before  # a dry run changes nothing
    result = s.bm("verify", "--repair", "--timeout", "20")
    assert result.code == 0, result
    assert "newarch: pinned to new (failed on old, no-cuda)" in result.out
    assert "newarch: tried no-cuda: exited with status 127" in result.out
    assert "missing-library" in result.out
    doc = s.json("verify", "--timeout", "20")  # it serves now, on its pin
    assert doc["failed"] == 0
    text = s.config.read_text()
    assert "newarch" in text and "backend: new" in text
    assert "plain" not in text  # a model that passed is never touched
    cmd = s.json("cmd", "newarch")
    assert cmd["argv"][0].endswith("/new/llama-server")
    # registry order held (hand-made rows carry no version): "newer" was never started for it
    tried = [x[0] for x in s.starts() if x[1] == "newarch"]
    assert tried[:6] == ["old", "no-cuda", "new"] * 2 and "newer" not in tried  # dry, real
    # nothing left to repair now
    again = s.json("verify", "--repair", "--timeout", "20")
    assert again["repair"]["results"] == [] and again["repair"]["changed"] is False
    assert none_left(s.fake)


def test_repair_reports_when_no_build_serves_it(s: Setup) -> None:
    write_gguf(s.models / "alien.gguf", "qwen3", layers=4, ctx=8192, size_bytes=MIB)
    s.write_config([row(s, "a", knows=[]), row(s, "b", fail="silent")])
    before = s.config.read_text()
    result = s.bm("verify", "--repair", "--timeout", "20")
    assert result.code == 1
    assert "alien: no installed build serves it (2 tried)" in result.out
    assert result.err.strip().endswith("error: 1 models still fail: alien")
    assert s.config.read_text() == before


def tuned_model(s: Setup, trained: int = 16384) -> None:
    write_gguf(s.models / "chat.gguf", "qwen3", layers=4, ctx=trained, size_bytes=MIB)


def test_tune_finds_the_largest_context_by_resident_memory(s: Setup) -> None:
    tuned_model(s)
    # 16 KiB per token: 4096 -> 64 MiB, 8192 -> 128, 12288 -> 192, 16384 -> 256 (+ Python)
    s.write_config([row(s, "cpu", k=16384)])
    before = s.json("models")
    (chat,) = before
    assert chat["tuning"] == "ctx 16384 from the trained context (no VRAM budget to size from)"
    result = s.bm("tune", "chat", "--budget", "0.22")
    assert result.code == 0, result
    assert "chat: ctx 12288 fits (" in result.out and "resident memory" in result.out
    assert (
        "; it had " + "ctx 16384 from the trained context (no VRAM budget to size from)"
        in result.out
    )  # the same words as models
    assert "chat: ctx 16384: no (" in result.out  # the trial lines
    ctxs = [x[2][x[2].index("-c") + 1] for x in s.starts()]
    assert ctxs[0] == "16384" and sorted(set(ctxs)) == ["12288", "16384", "8192"]
    assert none_left(s.fake)
    # generate uses it; models shows it
    argv = s.json("cmd", "chat")["argv"]
    assert argv[argv.index("-c") + 1] == "12288"
    (chat,) = s.json("models")
    assert chat["tuning"].startswith("ctx 12288 from tuning: 0.")
    # issue 33: one sentence, said once, the same in models and the generated file
    assert s.bm("models").out.count("ctx 12288 from tuning: 0.") == 1
    written = (s.config.parent / "llama-swap.yaml").read_text()
    assert "-c 12288" in written and chat["tuning"] in written
    # a hand-set ctx wins over it
    assert s.bm("set", "chat", "ctx=8192").code == 0
    (chat,) = s.json("models")
    assert chat["tuning"] == 'ctx 8192 from your setting ("backendmgr unset chat ctx" sizes it)'
    assert s.bm("unset", "chat", "ctx").code == 0
    # a new build makes it "not tuned" again
    exe = s.bin / "cpu" / "llama-server"
    exe.write_text(exe.read_text() + "\n# rebuilt\n")
    (chat,) = s.json("models")
    assert chat["tuning"] == "ctx 16384 from the trained context (no VRAM budget to size from)"


def test_tune_a_changed_model_is_not_tuned_again(s: Setup) -> None:
    tuned_model(s, trained=65536)
    s.write_config([row(s, "cpu", oom_above=20000)])
    doc = s.json("tune", "chat", "--budget", "4")
    (res,) = doc["results"]
    assert res["ok"] is True and res["ctx"] == 16384 and res["estimated_ctx"] == 32768
    causes = {t["ctx"]: t["cause"] for t in res["trials"]}
    assert causes[32768] == "out-of-memory" and causes[16384] is None
    argv = s.json("cmd", "chat")["argv"]
    assert argv[argv.index("-c") + 1] == "16384"
    time.sleep(0.01)
    tuned_model(s, trained=65536)  # rewritten: another mtime
    argv = s.json("cmd", "chat")["argv"]
    assert argv[argv.index("-c") + 1] == "32768"


def test_tune_vllm_by_max_model_len_with_the_pinned_pool(s: Setup) -> None:
    write_hf(s.models / "hfchat", QWEN3_8B)
    s.write_config([row(s, "vl", kind="vllm", oom_above=9000, k=1024)])
    result = s.bm("tune", "hfchat-bf16", "--budget", "64", "--max-attempts", "6")
    assert result.code == 0, result
    assert "hfchat-bf16: ctx 8192 fits" in result.out
    assert "out-of-memory" in result.out  # the trials above 9000 failed with vLLM's words
    argv = s.json("cmd", "hfchat-bf16")["argv"]
    assert argv[argv.index("--max-model-len") + 1] == "8192"
    assert "--kv-cache-memory-bytes" in argv


def test_tune_bad_input_is_one_line(s: Setup) -> None:
    tuned_model(s)
    s.write_config([row(s, "cpu")])
    for args, where in (
        (["--budget", "0"], "--budget"),
        (["--budget", "nan"], "--budget"),
        (["--max-attempts", "0"], "--max-attempts"),
    ):
        result = s.bm("tune", "chat", *args)
        assert result.code == 2 and where in result.err, result
    nobudget = s.bm("tune", "chat")
    assert nobudget.code == 2 and nobudget.err.startswith("error: no memory budget")
    unknown = s.bm("tune", "chta", "--budget", "1")
    assert unknown.code == 2 and 'no model "chta"' in unknown.err
    assert "did you mean chat?" in unknown.err  # the ids of every model, not of the one asked for
    assert not (s.fake / "pids").exists()
    assert not (s.home / "tuned.json").exists()


def test_tune_that_never_fits_records_nothing(s: Setup) -> None:
    tuned_model(s)
    s.write_config([row(s, "cpu", knows=[])])
    result = s.bm("tune", "chat", "--budget", "1")
    assert result.code == 1
    assert "chat: not tuned: it does not start at 16384" in result.out
    assert "unknown model architecture" in result.out
    assert not (s.home / "tuned.json").exists()


def test_ctrl_c_during_tune_leaves_no_process_and_no_change(s: Setup) -> None:
    tuned_model(s)
    s.write_config([row(s, "cpu", fail="hang")])
    config = s.config.read_text()
    proc = subprocess.Popen(
        [sys.executable, "-m", "backendmgr", "tune", "chat", "--budget", "1", "--timeout", "60"],
        env={**os.environ, "FAKE_DIR": str(s.fake)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        for _ in range(400):
            if (s.fake / "pids").exists() and (s.fake / "pids").read_text().strip():
                break
            time.sleep(0.05)
        (child,) = [int(x) for x in (s.fake / "pids").read_text().split()]
        assert alive(child)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, (out, err)
    assert "error: cancelled" in err and "Traceback" not in err
    assert none_left(s.fake)
    assert s.config.read_text() == config
    assert not (s.home / "tuned.json").exists()


# A stand-in nvidia-smi that reports, for each server the test started, 1 MiB per 64 tokens of
# the context on its command line (and an unrelated process that is not ours).
NVIDIA_SMI = r"""
import os, sys
assert sys.argv[1:] == ["--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"]
print("1, 99999")
for pid in open(os.path.join(os.environ["FAKE_DIR"], "pids")).read().split():
    try:
        argv = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
    except OSError:
        continue
    if b"-c" in argv:
        print(f"{pid}, {int(argv[argv.index(b'-c') + 1]) // 64}")
"""


def test_tune_reads_gpu_memory_from_nvidia_smi(s: Setup, monkeypatch: pytest.MonkeyPatch) -> None:
    tuned_model(s, trained=65536)
    smi = s.bin / "tools" / "nvidia-smi"
    smi.parent.mkdir(parents=True)
    smi.write_text(f"#!{sys.executable}\n{NVIDIA_SMI}")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{smi.parent}:{os.environ['PATH']}")
    s.write_config([row(s, "gpu")])
    doc = s.json("tune", "chat", "--budget", "0.3")  # 307 MiB: 16384 -> 256 fits, 20480 -> 320
    (res,) = doc["results"]
    assert res["ctx"] == 16384 and res["measured_by"] == "nvidia-smi"
    assert res["measured_gib"] == 0.25
    assert none_left(s.fake)


# --- issue 29: never healthy, the deadline, Ctrl-C at the end -------------------------------


def test_tune_a_server_that_never_becomes_healthy_ends_after_one_start(s: Setup) -> None:
    tuned_model(s)
    s.write_config([row(s, "cpu", fail="hang")])
    started = time.monotonic()
    result = s.bm("tune", "chat", "--budget", "1", "--timeout", "2")
    assert time.monotonic() - started < 30
    assert result.code == 1
    assert len(s.starts()) == 1  # not a memory failure: no smaller context is tried
    assert "chat: not tuned: it does not start at 16384: not healthy within 2 s" in result.out
    assert "; never-healthy: a load slower than 2 s" in result.out
    assert "fix: backendmgr tune chat --timeout 600" in result.out
    doc = s.json("tune", "chat", "--budget", "1", "--timeout", "2")
    (res,) = doc["results"]
    assert res["cause"]["code"] == "never-healthy" and len(res["trials"]) == 1
    assert res["cause"]["fix"] == "backendmgr tune chat --timeout 600"
    assert not (s.home / "tuned.json").exists()
    assert none_left(s.fake)


def test_tune_deadline_bounds_the_whole_run(s: Setup) -> None:
    tuned_model(s, trained=65536)
    s.write_config([row(s, "cpu", delay=1.0)])  # every start fits, each takes a second
    started = time.monotonic()
    doc = s.json("tune", "chat", "--budget", "4", "--deadline", "3.5", "--timeout", "60")
    took = time.monotonic() - started
    (res,) = doc["results"]
    assert took < 15, took
    assert res["stopped"] == "stopped at the --deadline of 3.5 s"
    assert res["ok"] is True and 1 <= len(res["trials"]) <= 4  # the largest found so far
    assert res["ctx"] == max(t["ctx"] for t in res["trials"] if t["ok"])
    assert (s.home / "tuned.json").exists()
    # a start the deadline cuts short is no "never healthy" verdict on the server
    s.write_config([row(s, "slow", delay=30.0)])
    doc = s.json("tune", "chat", "--budget", "4", "--deadline", "2", "--timeout", "60")
    (res,) = doc["results"]
    assert res["ok"] is False and res["stopped"] == "stopped at the --deadline of 2 s"
    assert res["cause"] is None
    assert none_left(s.fake)
    for bad in ("0", "-1", "nan", "1e9"):
        refused = s.bm("tune", "chat", "--budget", "4", "--deadline", bad)
        assert refused.code == 2 and "--deadline" in refused.err, refused


def _tune_process(s: Setup, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "backendmgr", "tune", "chat", *args],
        env={**os.environ, "FAKE_DIR": str(s.fake)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.parametrize("delay", [0.0, 0.005, 0.02, 0.05, 0.1, 0.3])
def test_ctrl_c_at_the_very_end_of_tune_is_all_or_nothing(s: Setup, delay: float) -> None:
    """SIGINT as the last start's server is gone (the search is over, the record not yet
    written): either it cancels and nothing changed, or the record was already being written
    and the command says so and succeeds; never "cancelled" with the result recorded."""
    tuned_model(s)
    s.write_config([row(s, "cpu", k=16384)])
    config = s.config.read_text()
    proc = _tune_process(s, "--budget", "0.22")
    try:
        last = None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            ctxs = [x[2][x[2].index("-c") + 1] for x in s.starts()]
            if len(ctxs) == 3:  # 16384, 8192, then 12288: the last start
                last = int((s.fake / "pids").read_text().split()[-1])
                break
            time.sleep(0.01)
        assert last is not None
        while alive(last) and time.monotonic() < deadline:
            time.sleep(0.001)
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert "Traceback" not in err
    recorded = (s.home / "tuned.json").exists()
    if proc.returncode == 130:
        assert "error: cancelled" in err
        assert not recorded and s.config.read_text() == config
    else:  # done; a SIGINT while the interpreter shuts down kills it (its default action)
        assert proc.returncode in (0, -signal.SIGINT), (out, err)
        assert recorded and "chat: ctx 12288 fits" in out
        if "cancelled" in out + err:
            raise AssertionError(f"said cancelled but recorded: {out}{err}")
    assert none_left(s.fake)


HELD = r"""
import os, signal, sys, anyio
from backendmgr._commit import committing, hold_to_exit

async def main(when):
    if when == "before":
        os.kill(os.getpid(), signal.SIGINT)
    if when in ("after", "twice"):
        hold_to_exit()
    async with committing() as held:
        if when == "inside":
            os.kill(os.getpid(), signal.SIGINT)
            await anyio.sleep(0.2)  # an await inside: the cancel must not land here
        print("block ran whole", flush=True)
    if when in ("after", "twice"):  # the command line: held to the end, the run returns
        os.kill(os.getpid(), signal.SIGINT)
        await anyio.sleep(0.05)
    if when == "twice":  # ... unless asked again: then it ends at once, saying why
        os.kill(os.getpid(), signal.SIGINT)
        await anyio.sleep(5)
    await anyio.sleep(0.05)
    return held.interrupts

try:
    print("returned", anyio.run(main, sys.argv[1]))
except KeyboardInterrupt:
    print("KeyboardInterrupt")
"""


@pytest.mark.parametrize(
    ("when", "said"),
    [
        ("before", "KeyboardInterrupt\n"),
        ("inside", "block ran whole\nreturned 1\n"),
        ("after", "block ran whole\nreturned 1\n"),
        ("twice", "block ran whole\n"),
    ],
)
def test_committing_cancels_before_and_holds_ctrl_c_inside(when: str, said: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", HELD, when], capture_output=True, text=True, timeout=60
    )
    assert done.stdout == said, done.stdout + done.stderr
    if when == "twice":
        assert done.returncode == 130
        assert done.stderr == "error: interrupted after the result was recorded; it stands\n"


@pytest.mark.asyncio
async def test_overlapping_undos_put_the_ctrl_c_handler_back_whatever_order_they_end() -> None:
    """The page's jobs stop their servers concurrently: an undo that ends before another
    must not leave its hold installed for good (Ctrl-C would never stop the server again)."""
    from backendmgr._commit import Held, undoing

    def mine(signum: int, frame: object) -> None:
        raise AssertionError("a held Ctrl-C reached the handler")

    async def undo(held: list[Held], entered: asyncio.Event, leave: asyncio.Event) -> None:
        async with undoing() as h:
            held.append(h)
            entered.set()
            await leave.wait()

    async def ctrl_c() -> None:
        os.kill(os.getpid(), signal.SIGINT)
        await asyncio.sleep(0.01)

    old = signal.signal(signal.SIGINT, mine)
    try:
        held: list[Held] = []
        events = [(asyncio.Event(), asyncio.Event()) for _ in range(2)]
        tasks = [asyncio.create_task(undo(held, *e)) for e in events]
        for entered, _ in events:
            await entered.wait()
        await ctrl_c()
        assert [h.interrupts for h in held] == [1, 1]
        events[0][1].set()  # the first in ends first
        await tasks[0]
        assert signal.getsignal(signal.SIGINT) is not mine  # the second still holds
        await ctrl_c()
        assert [h.interrupts for h in held] == [1, 2]
        events[1][1].set()
        await tasks[1]
        assert signal.getsignal(signal.SIGINT) is mine
    finally:
        signal.signal(signal.SIGINT, old)
