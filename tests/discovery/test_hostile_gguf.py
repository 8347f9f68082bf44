"""Hostile GGUF headers through the real CLI: one bad file is one skipped model (issue 10, 6).

The files are written byte by byte here (the ``gguf`` package refuses to write most of them),
and the model-sized ones are sparse: a 1 GiB string or a 200 M-element array costs a few
kilobytes of disk, so the test stays fast and small while the reader sees the real sizes.
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.support.cli import Cli, ok
from tests.support.ggufs import write_gguf

U8, U32, I32, F64, BOOL, STRING, ARRAY = 0, 4, 5, 12, 7, 8, 9
GIB = 1 << 30


def s(text: str) -> bytes:
    raw = text.encode()
    return struct.pack("<Q", len(raw)) + raw


def kv(key: str, vtype: int, payload: bytes) -> bytes:
    return s(key) + struct.pack("<I", vtype) + payload


def u32(key: str, value: int) -> bytes:
    return kv(key, U32, struct.pack("<I", value))


def header(count: int) -> bytes:
    return b"GGUF" + struct.pack("<IQQ", 3, 0, count)


def llama_keys() -> list[bytes]:
    """A plausible small llama: enough for a planned entry."""
    return [
        kv("general.architecture", STRING, s("llama")),
        u32("llama.block_count", 2),
        u32("llama.context_length", 4096),
        u32("llama.embedding_length", 256),
        u32("llama.attention.head_count", 4),
        u32("llama.attention.head_count_kv", 4),
    ]


def write_raw(path: Path, kvs: list[bytes], tail: bytes = b"") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(header(len(kvs)) + b"".join(kvs) + tail)
    return path


def write_sparse(
    path: Path, before: list[bytes], big: tuple[bytes, int], after: list[bytes]
) -> Path:
    """``before``, then one key whose value is ``big[0]`` followed by ``big[1]`` zero bytes
    (left as a hole), then ``after``: a model-sized file with a few KB on disk."""
    path.parent.mkdir(parents=True, exist_ok=True)
    prefix, hole = big
    with path.open("wb") as fh:
        fh.write(header(len(before) + 1 + len(after)) + b"".join(before) + prefix)
        fh.seek(hole, os.SEEK_CUR)
        fh.write(b"".join(after))
        fh.truncate(fh.tell())  # a hole at the very end still counts
    return path


def nested_arrays(depth: int) -> bytes:
    """An array of an array of … ``depth`` deep, the innermost empty."""
    return struct.pack("<IQ", ARRAY, 1) * (depth - 1) + struct.pack("<IQ", U32, 0)


def run_cli(tmp_path: Path, *args: str) -> tuple[int, str, str, int]:
    """Run the real CLI in a child; its own peak RSS (bytes) comes from wait4."""
    out_path, err_path = tmp_path / "stdout", tmp_path / "stderr"
    with out_path.open("wb") as out, err_path.open("wb") as err:
        proc = subprocess.Popen([sys.executable, "-m", "backendmgr", *args], stdout=out, stderr=err)
    timer = threading.Timer(300, proc.kill)
    timer.start()
    try:
        _, status, usage = os.wait4(proc.pid, 0)
    finally:
        timer.cancel()
    proc.returncode = os.waitstatus_to_exitcode(status)
    return (
        proc.returncode,
        out_path.read_text(),
        err_path.read_text(),
        usage.ru_maxrss * 1024,  # KiB on Linux
    )


@pytest.fixture
def models_root(tmp_path: Path, config_path: Path) -> Path:
    root = tmp_path / "models"
    write_gguf(root / "good-llama.gguf", "llama", layers=2, ctx=4096, embd=256, heads=4, kv_heads=4)
    config_path.parent.mkdir(parents=True, exist_ok=True)
    config_path.write_text(
        f"models_dirs: [{json.dumps(str(root))}]\n"
        "backends:\n  - id: llama-cpu\n    kind: llama\n    path: /opt/llama/llama-server\n"
    )
    return root


def f64(key: str, value: float) -> bytes:
    return kv(key, F64, struct.pack("<d", value))


def hostile(root: Path, case: str) -> Path:
    path = root / f"{case}.gguf"
    if case == "nested":  # 5 000 arrays deep: once a RecursionError
        return write_raw(path, [*llama_keys(), kv("general.junk", ARRAY, nested_arrays(5000))])
    if case == "float-counts":  # a float64 1e308 where counts belong: once an OverflowError
        keys = [
            kv("general.architecture", STRING, s("llama")),
            u32("llama.block_count", 2),
            f64("llama.context_length", 1e308),
            f64("llama.embedding_length", 1e308),
            u32("llama.attention.head_count", 4),
            kv("llama.attention.head_count_kv", ARRAY, struct.pack("<IQd", F64, 1, 1e308)),
            kv("llama.attention.causal", STRING, s("yes")),
        ]
        return write_raw(path, keys)
    if case == "huge-string":  # a 1 GiB name, then the keys that matter
        prefix = s("general.name") + struct.pack("<IQ", STRING, GIB)
        return write_sparse(path, [], (prefix, GIB), llama_keys())
    if case == "huge-arrays":  # 200 M fixed-size elements where a per-layer array belongs
        count = 200_000_000
        prefix = s("llama.attention.head_count_kv") + struct.pack("<IIQ", ARRAY, U32, count)
        return write_sparse(path, llama_keys()[:5], (prefix, 4 * count), [])
    if case == "huge-vocab":  # 100 M (empty) strings in the token list
        count = 100_000_000
        prefix = s("tokenizer.ggml.tokens") + struct.pack("<IIQ", ARRAY, STRING, count)
        return write_sparse(path, llama_keys(), (prefix, 8 * count), [])
    raise AssertionError(case)


# What each file becomes: skipped with a reason naming the defect, or a model whose unknown
# (wrongly typed, oversized) values are simply unknown.
EXPECT = {
    "nested": "arrays nested deeper than",
    "float-counts": None,
    "huge-string": None,
    "huge-arrays": None,
    "huge-vocab": "string array of 100000000 elements",
}


@pytest.mark.parametrize("case", sorted(EXPECT))
def test_hostile_header_is_one_model_never_a_failure(
    case: str, models_root: Path, tmp_path: Path, config_path: Path, cli: Cli
) -> None:
    bad = hostile(models_root, case)
    assert bad.stat().st_blocks * 512 < 1 << 20  # sparse: the test costs no disk
    code, out, err, rss = run_cli(tmp_path, "--json", "models")
    assert code == 0 and "Traceback" not in err, err
    models = {m["id"]: m for m in json.loads(out)}
    assert set(models) == {"good-llama", case}
    assert models["good-llama"]["skipped"] is None
    reason = EXPECT[case]
    if reason is None:
        assert models[case]["skipped"] is None, models[case]
    else:
        assert reason in (models[case]["skipped"] or ""), models[case]
        assert str(bad) in models[case]["skipped"]
    assert rss < 300 << 20, f"peak RSS {rss >> 20} MiB"
    cache = tmp_path / "home" / "cache" / "gguf-meta.json"
    assert cache.stat().st_size < 64 << 10

    code, out, err, rss = run_cli(tmp_path, "--json", "generate")
    assert code == 0 and "Traceback" not in err, err
    report = json.loads(out)
    text = (config_path.parent / "llama-swap.yaml").read_text()
    assert "good-llama:" in text
    if reason is None:
        assert report["models"] == 2 and f"{case}:" in text
    else:
        assert report["models"] == 1
        assert [s["id"] for s in report["skipped"]] == [case]
        assert f'# SKIPPED "{case}": ' in text and reason in text
    assert rss < 300 << 20, f"peak RSS {rss >> 20} MiB"

    # a mutating command regenerates as well, and must not fail either (its memory is not
    # measured: it runs in this process)
    ok(cli("set", "good-llama", "ctx=8192"))


def test_bounds_make_values_unknown_not_materialised(tmp_path: Path) -> None:
    """Wanted values over a bound are left out (unknown); the rest of the header still reads."""
    from backendmgr.discovery.gguf import MAX_ITEMS, MAX_TEXT, read_gguf_metadata
    from backendmgr.discovery.meta import meta_from_gguf

    keys = [
        *llama_keys()[:5],
        kv("general.name", STRING, s("n" * (MAX_TEXT + 1))),
        kv("general.type", ARRAY, struct.pack("<IQ", U8, 3) + b"abc"),
        kv(
            "llama.attention.head_count_kv",
            ARRAY,
            struct.pack("<IQ", U32, MAX_ITEMS + 1) + b"\0" * 4 * (MAX_ITEMS + 1),
        ),
        kv("x" * 10_000, STRING, s("a long key is stepped over")),
        f64("llama.expert_count", float("inf")),
    ]
    raw = read_gguf_metadata(write_raw(tmp_path / "m.gguf", keys))
    assert "general.name" not in raw and "llama.attention.head_count_kv" not in raw
    meta = meta_from_gguf(raw)
    assert meta.block_count == 2 and meta.name == "" and meta.type == ""
    assert meta.expert_count is None and meta.head_count_kv is None


def test_hostile_config_json_is_a_skip_line(tmp_path: Path, config_path: Path) -> None:
    """A config.json nested 100 000 deep (RecursionError in json) is one skipped folder."""
    root = tmp_path / "models"
    write_gguf(root / "good-llama.gguf", "llama", layers=2, ctx=4096, embd=256, heads=4, kv_heads=4)
    folder = root / "deep"
    folder.mkdir()
    (folder / "config.json").write_text("[" * 100_000 + "]" * 100_000)
    (folder / "model.safetensors").write_bytes(b"")
    config_path.parent.mkdir(parents=True, exist_ok=True)
    config_path.write_text(f"models_dirs: [{json.dumps(str(root))}]\n")
    code, out, err, _ = run_cli(tmp_path, "--json", "models")
    assert code == 0 and "Traceback" not in err, err
    models = {m["id"]: m for m in json.loads(out)}
    assert models["deep"]["skipped"] == "config.json: nested too deeply"
    assert models["good-llama"]["skipped"] is None
