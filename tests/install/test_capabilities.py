"""Build capabilities: probed at install from the build's own --help and --list-devices, kept in
the receipt, shown by ``list``/``backends``, warned about when a GPU build finds no GPU."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from backendmgr.catalog.capabilities import (
    parse_backends,
    parse_capabilities,
    parse_options,
    parse_version,
)
from backendmgr.install import probe
from backendmgr.mirror import MirrorServer
from tests.support import llama_entries, make_tar, ok, publish, publish_llama
from tests.support.cli import Cli
from tests.support.hostile_files import KINDS, plant
from tests.support.processes import assert_none_left, pids_in
from tests.support.standins import NEW_HELP, OLD_HELP

CUDA_DEVICES = "Available devices:\n  CUDA0: NVIDIA H200 (143771 MiB, 143000 MiB free)\n"
NO_DEVICES = "Available devices:\n"


def test_options_are_read_from_the_option_column_only() -> None:
    options = parse_options(NEW_HELP)
    for flag in ("-h", "--help", "--usage", "-fa", "--flash-attn", "-ngl", "--n-gpu-layers"):
        assert flag in options
    assert {"--jinja", "--reranking", "--rerank", "--embeddings", "--pooling"} <= set(options)
    assert "--rope-scale" not in options  # only mentioned in prose
    assert "-----" not in options and "(env:" not in " ".join(options)
    assert "--jinja" not in parse_options(OLD_HELP)
    # argparse style, tabs, --flag=VALUE, and junk lines
    argparse_help = "usage: x [-h]\n\t-h, --help\tshow\n  --max-model-len=N  len\n-\n--\n"
    assert parse_options(argparse_help) == ["--help", "--max-model-len", "-h"]


def test_version_and_backends() -> None:
    said = "ggml_cuda_init: found 1 CUDA devices:\nversion: 11211 (4f3a2b1c)\nbuilt with cc"
    assert parse_version(said) == ("version: 11211 (4f3a2b1c)", 11211, "4f3a2b1c")
    assert parse_version("vllm 0.11.0") == ("vllm 0.11.0", None, None)
    assert parse_backends([CUDA_DEVICES], devices_listed=True) == ["CPU", "CUDA"]
    assert parse_backends([NO_DEVICES], devices_listed=True) == ["CPU"]
    assert parse_backends(["load_backend: loaded Vulkan backend"], devices_listed=False) == [
        "Vulkan"
    ]
    assert parse_backends(["nothing here"], devices_listed=False) is None
    assert parse_backends(["  ROCm0: AMD Radeon RX 7900 XTX"], devices_listed=True) == [
        "CPU",
        "ROCm",
    ]
    # a help with no option at all is unknown, never "can do nothing"
    caps = parse_capabilities("version: 1 (abcd)\n", "version: 1 (abcd)")
    assert caps.options is None and caps.lists("--jinja") and caps.error


def test_install_records_capabilities_and_list_shows_them(
    cli: Cli, mirror: MirrorServer, mirror_root: Path, tmp_path: Path
) -> None:
    publish_llama(mirror_root, "b11211", ["cuda"], help_text=NEW_HELP, devices=CUDA_DEVICES)
    result = ok(cli("install", "llama-server", "b11211", "--variant", "cuda"))
    assert "warning:" not in result.err
    receipt = json.loads(
        (tmp_path / "home/builds/llama-server/b11211-cuda/.backendmgr.json").read_text()
    )
    caps = receipt["capabilities"]
    assert caps["build"] == 11211 and caps["version"] == "version: 11211 (b11211)"
    assert caps["backends"] == ["CPU", "CUDA"]
    assert "--jinja" in caps["options"] and "-fa" in caps["options"]
    listed = json.loads(ok(cli("--json", "list")).out)
    assert listed[0]["capabilities"] == caps
    rows = {r["id"]: r for r in json.loads(ok(cli("--json", "backends")).out)}
    assert rows["llama-server"]["capabilities"] == caps
    assert rows["llama-server@b11211-cuda"]["capabilities"] == caps
    assert "warning:" not in ok(cli("doctor")).err


def test_cuda_build_without_a_gpu_warns_at_install_and_in_doctor(
    cli: Cli, mirror: MirrorServer, mirror_root: Path
) -> None:
    publish_llama(mirror_root, "b11211", ["cuda"], help_text=NEW_HELP, devices=NO_DEVICES)
    result = ok(cli("install", "llama-server", "b11211", "--variant", "cuda"))
    warnings = [line for line in result.err.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1, result.err
    assert "llama-server@b11211-cuda is a cuda build but reports no GPU backend" in warnings[0]
    doctor = ok(cli("doctor"))
    assert "warning: llama-server@b11211-cuda is a cuda build" in doctor.err


def test_a_build_with_no_help_is_unknown_and_old_receipts_still_load(
    cli: Cli, mirror: MirrorServer, mirror_root: Path, tmp_path: Path
) -> None:
    publish_llama(mirror_root, "b100", ["vulkan"])  # answers every argument with its version
    ok(cli("install", "llama-server", "b100"))
    receipt_path = tmp_path / "home/builds/llama-server/b100-vulkan/.backendmgr.json"
    data = json.loads(receipt_path.read_text())
    assert data["capabilities"]["options"] is None
    assert "listed no options" in data["capabilities"]["error"]
    del data["capabilities"]  # a receipt written before capabilities existed
    receipt_path.write_text(json.dumps(data))
    listed = json.loads(ok(cli("--json", "list")).out)
    assert [b["id"] for b in listed] == ["llama-server@b100-vulkan"]
    assert listed[0]["capabilities"] is None
    ok(cli("doctor"))
    data["capabilities"] = {"options": 5, "backends": "CUDA"}  # malformed: still installed
    receipt_path.write_text(json.dumps(data))
    listed = json.loads(ok(cli("--json", "list")).out)
    assert [(b["id"], b["capabilities"]) for b in listed] == [("llama-server@b100-vulkan", None)]


def test_no_smoke_means_no_probe(cli: Cli, mirror: MirrorServer, mirror_root: Path) -> None:
    publish_llama(mirror_root, "b100", ["vulkan"], help_text=NEW_HELP)
    ok(cli("install", "llama-server", "b100", "--no-smoke"))
    assert json.loads(ok(cli("--json", "list")).out)[0]["capabilities"] is None


@pytest.mark.parametrize("mode", ["hang", "flood", "crash"])
def test_a_hostile_help_never_fails_the_install_or_leaves_a_process(
    cli: Cli,
    mirror: MirrorServer,
    mirror_root: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    mode: str,
) -> None:
    monkeypatch.setattr(probe, "TIMEOUT_S", 1.5)
    pids = tmp_path / "pids"
    behaviour = {
        # the program and a child it leaves behind both hold the output pipe
        "hang": f'sleep 60 & echo "$$ $!" > "{pids}"; wait',
        "flood": f'echo "$$" > "{pids}"; exec yes -- "--flag-from-a-flood"',
        "crash": 'echo "Segmentation fault" >&2; exit 139',
    }[mode]
    entries = llama_entries("b100")
    for entry in entries:
        if entry.name.endswith("/llama-server"):
            entry.data = (
                f'#!/bin/sh\nif [ "$1" = "--help" ]; then {behaviour}; fi\n'
                'echo "version: 100 (b100)"\n'
            ).encode()
    asset = {"llama-b100-bin-ubuntu-vulkan-x64.tar.gz": make_tar(entries)}
    publish(mirror_root, "ggml-org/llama.cpp", "b100", asset)
    started = time.monotonic()
    ok(cli("install", "llama-server", "b100"))
    assert time.monotonic() - started < 30
    caps = json.loads(ok(cli("--json", "list")).out)[0]["capabilities"]
    assert caps["options"] is None
    expected = {"hang": "did not finish", "flood": "more than 1 MiB", "crash": "exit status"}
    assert expected[mode] in caps["error"]
    if mode != "crash":
        assert_none_left(pids_in(pids))  # the probe stopped the program and its child


def manual_server(path: Path, help_text: str, counter: Path) -> None:
    path.write_text(
        "#!/bin/sh\n"
        f'if [ "$1" = "--help" ]; then echo x >> "{counter}"; cat <<\'END\'\n{help_text}\nEND\n'
        "exit 0; fi\n"
        'echo "version: 7 (abcdef0)"\n'
    )
    path.chmod(0o755)


def test_manual_rows_are_probed_once_and_again_when_the_file_changes(
    cli: Cli, tmp_path: Path
) -> None:
    exe = tmp_path / "bin" / "llama-server"
    exe.parent.mkdir()
    counter = tmp_path / "probes"
    manual_server(exe, OLD_HELP, counter)
    ok(cli("backends", "add", "mine", "--kind", "llama", "--path", str(exe)))
    first = {r["id"]: r for r in json.loads(ok(cli("--json", "backends")).out)}
    assert "--jinja" not in first["mine"]["capabilities"]["options"]
    assert first["mine"]["capabilities"]["build"] == 7
    ok(cli("--json", "backends"))
    assert counter.read_text().count("x") == 1  # cached by path, size and mtime
    cache = tmp_path / "home" / "cache" / "capabilities.json"
    assert str(exe) in json.loads(cache.read_text())["entries"]
    manual_server(exe, NEW_HELP, counter)  # the user upgraded it in place
    again = {r["id"]: r for r in json.loads(ok(cli("--json", "backends")).out)}
    assert "--jinja" in again["mine"]["capabilities"]["options"]
    assert counter.read_text().count("x") == 2
    cache.write_text("{not json")  # a broken cache only costs a probe
    ok(cli("--json", "backends"))
    assert counter.read_text().count("x") == 3
    assert json.loads(cache.read_text())["format"] == 1


@pytest.mark.parametrize("kind", KINDS)
def test_a_hostile_capabilities_cache_is_no_cache(tmp_path: Path, kind: str) -> None:
    """JSON nested 100 000 deep once escaped the cache's reader (RecursionError), a FIFO in its
    place hung every command that probes; the GGUF header cache is read the same way."""
    import threading

    from backendmgr.discovery.walk import MetaCache
    from backendmgr.install.probe_cache import CapabilityCache

    for path in (tmp_path / "capabilities.json", tmp_path / "gguf-meta.json"):
        plant(path, kind)
    made: list[object] = []

    def read() -> None:
        made.append(CapabilityCache(tmp_path / "capabilities.json").entries)
        made.append(MetaCache(tmp_path / "gguf-meta.json").entries)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(20)
    assert made == [{}, {}]
