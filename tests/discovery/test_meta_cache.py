"""The GGUF header cache is read as strictly as ``record.load`` reads free-form data (no NaN,
no lone surrogate, nested at most ``MAX_DEPTH``), on its fast path (no escape of a surrogate
in the file: the parse and one walk over the containers check it) and on the long one (every
value looked at): a file either path refuses is no cache at all."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from backendmgr.discovery.walk import CACHE_FORMAT, MetaCache
from backendmgr.record import MAX_DEPTH

HEADER = {"general.architecture": "llama", "llama.block_count": 2, "general.name": "bench"}


def _nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


def _write(path: Path, entries: Any, *, extra: str = "") -> bytes:
    """A cache as :meth:`MetaCache.save` writes it; ``extra``: one more entry's raw JSON
    (what ``json.dumps`` would never write: a NaN, an unpaired surrogate)."""
    body = json.dumps({"format": CACHE_FORMAT, "entries": entries}, separators=(",", ":"))
    if extra:
        body = body[: -len("}}")] + ("," if entries else "") + extra + "}}"
    raw = body.encode()
    path.write_bytes(raw)
    return raw


# the long path: a surrogate pair's escape (an emoji in a model's name) makes the file one
LONG = {"/m/long.gguf": [1, 2, {**HEADER, "general.name": "\U0001f600"}]}


@pytest.mark.parametrize("long", [False, True], ids=["fast", "long"])
def test_a_cache_as_written_reads_back(tmp_path: Path, long: bool) -> None:
    entries: dict[str, Any] = {
        "/m/a.gguf": [10, 20, HEADER],
        "/m/caf\u00e9.gguf": [11, 21, {**HEADER, "general.name": "caf\u00e9"}],  # é: escaped
        "/m/bad.gguf": [12, 22, "unreadable header"],
        "/m/deep.gguf": [13, 23, {**HEADER, "x": _nested(MAX_DEPTH - 2)}],  # the deepest kept
        "/m/inf.gguf": [14, 24, {**HEADER, "f": float("inf")}],  # as load reads an Any
    }
    if long:
        entries.update(LONG)
    raw = _write(tmp_path / "gguf-meta.json", entries)
    assert (b"\\ud83d" in raw) is long
    cache = MetaCache(tmp_path / "gguf-meta.json")
    assert cache.entries == entries
    assert cache.get("/m/a.gguf", 10, 20) == HEADER
    assert cache.get("/m/a.gguf", 10, 21) is None  # changed since: read again


HOSTILE = {
    "nan": '"/m/x.gguf":[1,2,{"f":NaN}]',
    "lone surrogate escaped": '"/m/x.gguf":[1,2,{"general.name":"a\\ud800b"}]',
    "lone surrogate in a key": '"/m/\\udc00.gguf":[1,2,{}]',
    "too deep": '"/m/x.gguf":[1,2,{"x":' + json.dumps(_nested(MAX_DEPTH - 1)) + "}]",
    "far too deep": '"/m/x.gguf":' + "[" * 5000 + "]" * 5000,
}


@pytest.mark.parametrize("long", [False, True], ids=["fast", "long"])
@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_hostile_entry_makes_no_cache(tmp_path: Path, case: str, long: bool) -> None:
    entries = dict(LONG) if long else {"/m/a.gguf": [10, 20, HEADER]}
    _write(tmp_path / "gguf-meta.json", entries, extra=HOSTILE[case])
    assert MetaCache(tmp_path / "gguf-meta.json").entries == {}


@pytest.mark.parametrize(
    "raw",
    [
        b'{"format":1,"entries":{"/m/a.gguf":[1,2,{"n":"\xed\xa0\x80"}]}}',  # surrogate in UTF-8
        b'{"format":1,"entries":{"/m/a.gguf":[1,2,{"n":"\xff"}]}}',  # not UTF-8
        '{"format":1,"entries":{}}'.encode("utf-16"),  # not what save writes
        b'{"format":1,"entries":[]}',
        b'{"format":true,"entries":{}}',
        b'{"format":2,"entries":{"/m/a.gguf":[1,2,{}]}}',
        b'{"format":1,"entries":{},"more":1}',
        b"[]",
        b"NaN",
    ],
)
def test_a_malformed_file_is_no_cache(tmp_path: Path, raw: bytes) -> None:
    (tmp_path / "gguf-meta.json").write_bytes(raw)
    assert MetaCache(tmp_path / "gguf-meta.json").entries == {}
