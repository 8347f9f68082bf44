from __future__ import annotations

import random
import struct
from pathlib import Path

import gguf
import numpy as np
import pytest

from backendmgr.discovery.gguf import GgufError, parse_header, read_gguf_metadata
from backendmgr.discovery.meta import meta_from_gguf
from tests.support.ggufs import write_gguf


def test_reads_wanted_keys_from_a_real_file(tmp_path: Path) -> None:
    path = write_gguf(
        tmp_path / "m.gguf",
        "llama",
        layers=32,
        heads=32,
        kv_heads=8,
        ctx=8192,
        vocab=2000,
        chat_template="{% for m in messages %}{{m}}{% endfor %}",
        extra={"llama.rope.dimension_count": 128, "llama.expert_count": 0},
    )
    raw = read_gguf_metadata(path)
    meta = meta_from_gguf(raw)
    assert (meta.architecture, meta.block_count, meta.head_count, meta.head_count_kv) == (
        "llama",
        32,
        32,
        8,
    )
    assert (meta.context_length, meta.key_length, meta.rope_dimension_count) == (8192, 128, 128)
    assert "tokenizer.ggml.tokens" not in raw  # never decoded


def test_every_value_type(tmp_path: Path) -> None:
    path = tmp_path / "types.gguf"
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_uint8("t.u8", 200)
    w.add_int8("t.i8", -5)
    w.add_uint16("t.u16", 60000)
    w.add_int16("t.i16", -300)
    w.add_uint32("llama.block_count", 7)
    w.add_int32("t.i32", -70000)
    w.add_float32("t.f32", 1.5)
    w.add_bool("llama.attention.causal", False)
    w.add_string("t.str", "héllo")
    w.add_array("t.arr", [1, 2, 3])
    w.add_array("t.strs", ["a", "bb"])
    w.add_uint64("llama.context_length", 1 << 33)
    w.add_int64("t.i64", -(1 << 40))
    w.add_float64("t.f64", 2.25)
    w.add_array("llama.attention.head_count_kv", [4, 0, 4])
    w.add_tensor("x", np.zeros(4, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    keys = [
        "t.u8",
        "t.i8",
        "t.u16",
        "t.i16",
        "t.i32",
        "t.f32",
        "t.str",
        "t.arr",
        "t.strs",
        "t.i64",
        "t.f64",
    ]
    raw = parse_header(path.read_bytes(), str(path), keys=keys)
    assert [raw[k] for k in keys] == [
        200,
        -5,
        60000,
        -300,
        -70000,
        1.5,
        "héllo",
        [1, 2, 3],
        ["a", "bb"],
        -(1 << 40),
        2.25,
    ]
    meta = meta_from_gguf(raw)
    assert meta.causal is False and meta.context_length == 1 << 33
    assert meta.block_count == 7 and meta.head_count_kv == [4, 0, 4]


def test_version_2_header(tmp_path: Path) -> None:
    data = bytearray(write_gguf(tmp_path / "m.gguf", layers=3).read_bytes())
    data[4:8] = struct.pack("<I", 2)
    assert meta_from_gguf(parse_header(bytes(data), "v2")).block_count == 3


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: b"GGUX" + d[4:], "(bad magic) at offset 0"),
        (lambda d: d[:4] + struct.pack("<I", 9) + d[8:], "unsupported GGUF version 9 at offset 4"),
        (lambda d: d[:4] + struct.pack(">I", 3) + d[8:], "big-endian GGUF is not supported"),
        (lambda d: d[:30], "truncated"),
        (lambda d: d[:10], "truncated: 8 bytes needed, 2 left at offset 8"),
        (lambda d: b"", "truncated"),
    ],
)
def test_corrupt_headers_name_file_and_offset(tmp_path: Path, mutate: object, message: str) -> None:
    good = write_gguf(tmp_path / "m.gguf").read_bytes()
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(mutate(good))  # type: ignore[operator]
    with pytest.raises(GgufError) as info:
        read_gguf_metadata(bad)
    assert str(info.value).startswith(str(bad))
    assert message in str(info.value)


def test_fuzzed_headers_never_crash(tmp_path: Path) -> None:
    """Thousands of truncations, flipped bytes and random files: a GgufError or a result."""
    good = write_gguf(tmp_path / "m.gguf", vocab=50, chat_template="x").read_bytes()
    header_end = len(good) - 4 * 4 * 4  # roughly where the tensor data starts
    rng = random.Random(1129)
    cases: list[bytes] = [good[:n] for n in range(0, header_end, 7)]
    for _ in range(2000):
        data = bytearray(good)
        for _ in range(rng.randint(1, 8)):
            data[rng.randrange(0, header_end)] = rng.randrange(256)
        cases.append(bytes(data))
    cases += [
        b"GGUF" + bytes(rng.randrange(256) for _ in range(rng.randint(0, 300))) for _ in range(500)
    ]
    outcomes = {"ok": 0, "error": 0}
    for i, data in enumerate(cases):
        try:
            parse_header(data, f"case{i}")
            outcomes["ok"] += 1
        except GgufError as exc:
            assert f"case{i}:" in str(exc) and "offset" in str(exc)
            outcomes["error"] += 1
    assert outcomes["error"] > 500 and outcomes["ok"] > 0
