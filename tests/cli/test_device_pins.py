"""One model, one GPU (issue 24) through the real CLI: a host described with two NVIDIA cards
of different memory, CUDA, ROCm and CPU builds of llama.cpp installed from the loopback
mirror, and the ``env:`` each model's llama-swap entry gets from the build that resolves for
it. The generated file is checked against llama-swap's schema and loaded by the real
llama-swap, which starts a stand-in server with the entry's environment."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from ruamel.yaml import YAML

from backendmgr.discovery.gguf import read_gguf_metadata
from backendmgr.discovery.meta import meta_from_gguf
from backendmgr.emit.sizing import llama_sizing
from backendmgr.mirror import MirrorServer
from tests.support import publish_llama
from tests.support.cli import CliResult
from tests.support.generated import load, output
from tests.support.ggufs import write_gguf
from tests.support.paths import SHARED

Cli = Callable[..., CliResult]
GIB = 1 << 30
TWO_CARDS = "NVIDIA GeForce RTX 4090:24;NVIDIA GeForce RTX 3060:12"
SCHEMA = SHARED / "llama-swap" / "config-schema.json"
LLAMA_SWAP = SHARED / "llama-swap" / "bin" / "llama-swap"
CUDA_1 = ["CUDA_DEVICE_ORDER=PCI_BUS_ID", "CUDA_VISIBLE_DEVICES=1"]


def ok(result: CliResult) -> CliResult:
    assert result.code == 0, result
    assert "Traceback" not in result.err, result.err
    return result


def one_error(result: CliResult) -> str:
    assert result.code != 0, result
    assert "Traceback" not in result.err, result.err
    errors = [line for line in result.err.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, result.err
    return errors[0]


def entry(config_path: Path, model: str) -> dict[str, Any]:
    found = load(config_path)["models"][model]
    assert isinstance(found, dict)
    return found


def check_schema(config_path: Path) -> None:
    import jsonschema

    if not SCHEMA.is_file():
        pytest.skip(f"llama-swap's schema is not at {SCHEMA}")
    jsonschema.Draft7Validator(json.loads(SCHEMA.read_text())).validate(load(config_path))


@pytest.fixture
def host(mirror: MirrorServer, mirror_root: Path, monkeypatch: pytest.MonkeyPatch) -> MirrorServer:
    monkeypatch.setenv("BACKENDMGR_GPU", TWO_CARDS)
    publish_llama(mirror_root, "b100", ("cuda", "rocm", "cpu"))
    return mirror


@pytest.fixture
def models(tmp_path: Path, config_path: Path) -> Path:
    root = tmp_path / "models"
    for name in ("qwen3-pinned", "qwen3-follows"):
        write_gguf(root / f"{name}.gguf", "qwen3", size_bytes=4 * GIB)
    config_path.parent.mkdir(parents=True, exist_ok=True)
    config_path.write_text(f"models_dirs: [{json.dumps(str(root))}]\n")
    return root


def ctx_for(models: Path, card_gb: float) -> int:
    meta = meta_from_gguf(read_gguf_metadata(models / "qwen3-pinned.gguf"))
    ctx = llama_sizing(meta, 4.0, card_gb, None, headroom_gb=0.1).ctx
    return ctx


def install_cuda_and_rocm(cli: Cli) -> None:
    ok(cli("install", "llama-server", "b100", "--variant", "cuda"))
    ok(cli("install", "llama-server", "b100", "--variant", "rocm"))


def test_device_follows_the_build_that_resolves(
    cli: Cli, host: MirrorServer, models: Path, config_path: Path
) -> None:
    install_cuda_and_rocm(cli)
    ok(cli("set", "qwen3-pinned", "device=1"))
    ok(cli("set", "qwen3-follows", "device=1"))
    pinned = entry(config_path, "qwen3-pinned")
    assert pinned["env"] == CUDA_1
    assert pinned["capabilities"]["context"] == ctx_for(models, 12.0)  # card 1's 12 GiB
    assert ctx_for(models, 12.0) < ctx_for(models, 24.0)
    assert pinned["metadata"]["est_vram_gb"] <= 12.0
    ok(cli("set", "qwen3-pinned", "device=0"))
    assert entry(config_path, "qwen3-pinned")["capabilities"]["context"] == ctx_for(models, 24.0)
    ok(cli("set", "qwen3-pinned", "device=1"))

    # pinned to the ROCm build: ROCm's variable, and no CUDA one, while ★ stays CUDA
    ok(cli("pin", "qwen3-pinned", "llama-server@b100-rocm"))
    pinned = entry(config_path, "qwen3-pinned")
    assert pinned["env"] == ["HIP_VISIBLE_DEVICES=1"]
    assert not any(w.startswith("CUDA_") for w in pinned["env"])
    assert entry(config_path, "qwen3-follows")["env"] == CUDA_1
    check_schema(config_path)

    # activating the ROCm build moves the unpinned model; a CUDA-pinned one stays on CUDA
    ok(cli("pin", "qwen3-pinned", "llama-server@b100-cuda"))
    ok(cli("activate", "llama-server@b100-rocm"))
    assert entry(config_path, "qwen3-pinned")["env"] == CUDA_1
    assert entry(config_path, "qwen3-follows")["env"] == ["HIP_VISIBLE_DEVICES=1"]

    # unset: no device, no env at all
    ok(cli("unset", "qwen3-follows", "device"))
    assert "env" not in entry(config_path, "qwen3-follows")
    check_schema(config_path)
    assert json.loads(ok(cli("--json", "generate", "--check")).out)["changed"] is False


def test_switching_the_default_leaves_a_pinned_model_alone(
    cli: Cli, host: MirrorServer, models: Path, config_path: Path, tmp_path: Path
) -> None:
    """A manual row whose ``--list-devices`` lists Vulkan devices takes ★: the unpinned model
    gets Vulkan's variable, the model pinned to the CUDA build keeps CUDA's."""
    install_cuda_and_rocm(cli)
    vk = tmp_path / "opt" / "llama-vk"
    vk.parent.mkdir(parents=True)
    vk.write_text(
        "#!/bin/sh\n"
        'case "$1" in\n'
        '  --help) printf "usage:\\n  --list-devices   list devices\\n  --jinja\\n";;\n'
        '  --list-devices) printf "Available devices:\\n  Vulkan0: RTX 4090\\n'
        '  Vulkan1: RTX 3060\\n";;\n'
        '  *) echo "version: 1 (abcdef1)";;\n'
        "esac\n"
    )
    vk.chmod(0o755)
    ok(cli("backends", "add", "vk", "--kind", "llama", "--path", str(vk)))
    ok(cli("pin", "qwen3-pinned", "llama-server@b100-cuda"))
    ok(cli("set", "qwen3-pinned", "device=1"))
    ok(cli("set", "qwen3-follows", "device=1"))
    before = entry(config_path, "qwen3-pinned")
    assert entry(config_path, "qwen3-follows")["env"] == CUDA_1
    ok(cli("default", "vk"))
    assert entry(config_path, "qwen3-pinned")["env"] == before["env"] == CUDA_1
    assert entry(config_path, "qwen3-follows")["env"] == ["GGML_VK_VISIBLE_DEVICES=1"]
    check_schema(config_path)


def test_a_cpu_build_gets_no_variable_and_a_note(
    cli: Cli, host: MirrorServer, models: Path, config_path: Path
) -> None:
    ok(cli("install", "llama-server", "b100", "--variant", "cpu"))
    ok(cli("set", "qwen3-pinned", "device=1", "env=GGML_SCHED_MAX_COPIES=1"))
    assert entry(config_path, "qwen3-pinned")["env"] == ["GGML_SCHED_MAX_COPIES=1"]
    text = output(config_path).read_text(encoding="utf-8")
    assert (
        "# NOTE device 1 does not apply: llama-server@b100-cpu is a CPU build (no GPU to choose)"
        in text
    )
    info = {m["id"]: m for m in json.loads(ok(cli("--json", "models")).out)}
    assert any("does not apply" in n for n in info["qwen3-pinned"]["notes"])


def test_a_device_the_host_lacks_warns(
    cli: Cli, models: Path, config_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BACKENDMGR_GPU", TWO_CARDS)
    result = ok(cli("set", "qwen3-pinned", "device=7"))
    assert (
        "warning: device 7 is not a GPU this host reports (GPUs: 0: NVIDIA GeForce RTX 4090, "
        "24.0 GiB (nvidia), 1: NVIDIA GeForce RTX 3060, 12.0 GiB (nvidia)); kept as set"
    ) in result.err.splitlines()
    assert "device: '7'" in config_path.read_text() or "device: '7'\n" in config_path.read_text()
    assert not [
        w for w in ok(cli("set", "qwen3-pinned", "device=1")).err.splitlines() if "GPU" in w
    ]
    doctor = json.loads(cli("--json", "doctor").out)
    assert doctor["gpus"] == [
        "GPU 0: NVIDIA GeForce RTX 4090, 24.0 GiB (nvidia)",
        "GPU 1: NVIDIA GeForce RTX 3060, 12.0 GiB (nvidia)",
    ]
    assert "GPU 1: NVIDIA GeForce RTX 3060, 12.0 GiB (nvidia)" in cli("catalog").err
    ok(cli("set", "qwen3-pinned", "device=7"))
    notes = json.loads(cli("--json", "doctor").out)["notes"]
    assert any(n.startswith('model "qwen3-pinned": device 7 is not a GPU') for n in notes)


@pytest.mark.parametrize(
    "value",
    ["A=1\nB: 2", "A=x\u202ey", "A=x\u200by", "A=x\u2028y", "A=x\x85y", "lower=1", "A=1 pwn:"],
)
def test_hostile_env_is_refused_and_changes_nothing(
    cli: Cli, models: Path, config_path: Path, value: str
) -> None:
    before = config_path.read_bytes()
    line = one_error(cli("set", "qwen3-pinned", f"env={value}"))
    assert line.startswith("error: env: ") and "\n" not in line
    assert config_path.read_bytes() == before


def test_yaml_characters_in_env_are_plain_strings(
    cli: Cli, host: MirrorServer, models: Path, config_path: Path
) -> None:
    ok(cli("install", "llama-server", "b100", "--variant", "cuda"))
    typed = "A_B='x: y # z' C='- [1]' D='&anchor *ref' E='{\"k\": 1}' F= CUDA_VISIBLE_DEVICES=0"
    ok(cli("set", "qwen3-pinned", "device=1", f"env={typed}"))
    words = ["A_B=x: y # z", "C=- [1]", "D=&anchor *ref", 'E={"k": 1}', "F="]
    got = entry(config_path, "qwen3-pinned")
    # the user's CUDA_VISIBLE_DEVICES comes after ours and replaces it: each key once
    assert got["env"] == ["CUDA_DEVICE_ORDER=PCI_BUS_ID", *words, "CUDA_VISIBLE_DEVICES=0"]
    assert set(got) == {"cmd", "env", "ttl", "metadata", "capabilities"}
    assert set(load(config_path)["models"]) == {"qwen3-pinned", "qwen3-follows"}
    check_schema(config_path)
    # the config file holds them as strings too, and reads back the same
    stored = YAML(typ="safe").load(config_path.read_text())["models"]["qwen3-pinned"]
    assert stored["env"] == [*words, "CUDA_VISIBLE_DEVICES=0"]


# --- the real llama-swap ---------------------------------------------------------------------

STANDIN = r"""
import json, os, sys
from http.server import BaseHTTPRequestHandler, HTTPServer

args = sys.argv[1:]
if args[:1] == ["--help"]:
    print("usage: llama-server [options]\n  --list-devices   list devices\n  --jinja")
    sys.exit(0)
if args[:1] == ["--list-devices"]:
    print("Available devices:\n  CUDA0: NVIDIA GeForce RTX 4090 (24000 MiB, 23000 MiB free)\n"
          "  CUDA1: NVIDIA GeForce RTX 3060 (12000 MiB, 11000 MiB free)")
    sys.exit(0)
if args[:1] == ["--version"]:
    print("version: 11434 (abcdef0)")
    sys.exit(0)
seen = {k: os.environ.get(k) for k in ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "MY_FLAG")}
with open(os.environ["STANDIN_LOG"], "a") as fh:
    fh.write(json.dumps(seen) + "\n")
card = {"1": "NVIDIA GeForce RTX 3060"}.get(seen["CUDA_VISIBLE_DEVICES"], "NVIDIA GeForce RTX 4090")
print(f"llama_model_load_from_file_impl: using device CUDA0 ({card}) - 11000 MiB free", flush=True)

class Handler(BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def send(self, data):
        body = json.dumps(data).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        self.send({"status": "ok"})

    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(n)
        self.send({"choices": [{"message": {"role": "assistant", "content": "OK"}}]})

HTTPServer(("127.0.0.1", int(args[args.index("--port") + 1])), Handler).serve_forever()
"""


@pytest.fixture
def served(
    cli: Cli, tmp_path: Path, models: Path, config_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """A manual llama row (a stand-in that logs its environment) for a two-card host."""
    monkeypatch.setenv("BACKENDMGR_GPU", TWO_CARDS)
    log = tmp_path / "env.log"
    monkeypatch.setenv("STANDIN_LOG", str(log))
    exe = tmp_path / "opt" / "llama-server"
    exe.parent.mkdir(parents=True)
    exe.write_text(f"#!{sys.executable}\n{STANDIN}")
    exe.chmod(0o755)
    ok(cli("backends", "add", "cuda-src", "--kind", "llama", "--path", str(exe)))
    ok(cli("set", "qwen3-pinned", "device=1", "env=MY_FLAG='a: b # c'"))
    assert entry(config_path, "qwen3-pinned")["env"] == [*CUDA_1, "MY_FLAG=a: b # c"]
    return log


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def llama_swap(served: Path, config_path: Path) -> Iterator[str]:
    if not LLAMA_SWAP.is_file():
        pytest.skip(f"the llama-swap binary is not at {LLAMA_SWAP}")
    check_schema(config_path)
    port = _free_port()
    proc = subprocess.Popen(
        [str(LLAMA_SWAP), "-config", str(output(config_path)), "-listen", f"127.0.0.1:{port}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={**os.environ},
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 20
        while True:
            assert proc.poll() is None, proc.stdout.read().decode() if proc.stdout else ""
            try:
                if httpx.get(f"{base}/v1/models", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "llama-swap did not answer /v1/models"
            time.sleep(0.05)
        yield base
    finally:
        os.killpg(proc.pid, 15)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait()
        if proc.stdout:
            proc.stdout.close()


def test_llama_swap_loads_the_file_and_starts_the_model_with_its_env(
    llama_swap: str, served: Path
) -> None:
    listed = httpx.get(f"{llama_swap}/v1/models", timeout=5).json()
    assert {m["id"] for m in listed["data"]} == {"qwen3-pinned", "qwen3-follows"}
    answer = httpx.post(
        f"{llama_swap}/v1/chat/completions",
        json={"model": "qwen3-pinned", "messages": [{"role": "user", "content": "hi"}]},
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    seen = [json.loads(line) for line in served.read_text().splitlines()]
    assert seen[-1] == {
        "CUDA_VISIBLE_DEVICES": "1",
        "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
        "MY_FLAG": "a: b # c",
    }


def test_verify_starts_the_entry_with_its_env_and_names_the_device(cli: Cli, served: Path) -> None:
    result = ok(cli("verify", "qwen3-pinned"))
    assert "on CUDA0 (NVIDIA GeForce RTX 3060)" in result.out
    seen = [json.loads(line) for line in served.read_text().splitlines()]
    assert seen[-1]["CUDA_VISIBLE_DEVICES"] == "1" and seen[-1]["MY_FLAG"] == "a: b # c"
    report = json.loads(ok(cli("--json", "verify", "qwen3-pinned")).out)
    assert report["results"][0]["device"] == "CUDA0 (NVIDIA GeForce RTX 3060)"
    listed = {m["id"]: m for m in json.loads(ok(cli("--json", "models")).out)}
    assert listed["qwen3-pinned"]["verification"].startswith("verified today: ok")
    # another device is another run: the cached result no longer applies
    ok(cli("set", "qwen3-pinned", "device=0"))
    listed = {m["id"]: m for m in json.loads(ok(cli("--json", "models")).out)}
    assert listed["qwen3-pinned"]["verification"] == "not verified"
    result = ok(cli("verify", "qwen3-pinned"))
    assert "on CUDA0 (NVIDIA GeForce RTX 4090)" in result.out
