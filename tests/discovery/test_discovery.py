from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from backendmgr.discovery.models import DiscoveredModel, Discovery, assign_ids, hf_qualifies
from backendmgr.discovery.walk import discover, scan_folders
from tests.support.ggufs import GEMMA3_WRAPPER, LLAMA3_8B, QWEN2_AWQ, T5, write_gguf, write_hf


def run(tmp_path: Path, *dirs: Path) -> Discovery:
    return discover(scan_folders([str(d) for d in dirs]), tmp_path / "cache.json")


def by_id(found: Discovery) -> dict[str, DiscoveredModel]:
    return {m.id: m for m in found.models}


def test_gguf_ids_projectors_and_classes(tmp_path: Path) -> None:
    root = tmp_path / "models"
    write_gguf(root / "Qwen3-VL-8B-Q4_K_M.gguf", "qwen3vl", layers=4)
    write_gguf(root / "mmproj-Qwen3-VL-8B-F16.gguf", "clip", general_type="mmproj", layers=1)
    write_gguf(
        root / "embed" / "nomic-embed-text-v1.5.Q8_0.gguf", "nomic-bert", layers=2, pooling=1
    )
    write_gguf(root / "embed" / "bge-reranker-v2-m3.gguf", "bert", layers=2, pooling=4)
    write_gguf(root / "embed" / "e5-causal-off.gguf", "qwen3", layers=2, causal=False)
    write_gguf(root / "img" / "flux1-dev.gguf", "flux", layers=1)
    write_gguf(root / "noarch.gguf", "", layers=1)
    found = run(tmp_path, root)
    models = by_id(found)
    assert sorted(models) == [
        "bge-reranker-v2-m3",
        "e5-causal-off",
        "nomic-embed-text-v1.5.q8_0",
        "qwen3-vl-8b-q4_k_m",
    ]
    chat = models["qwen3-vl-8b-q4_k_m"]
    assert chat.role == "chat" and chat.mmproj == str(root / "mmproj-Qwen3-VL-8B-F16.gguf")
    assert models["nomic-embed-text-v1.5.q8_0"].role == "embedding"
    assert models["nomic-embed-text-v1.5.q8_0"].mmproj is None
    assert models["bge-reranker-v2-m3"].role == "reranker"
    assert models["e5-causal-off"].role == "embedding"
    skipped = {s.id: s.reason for s in found.skipped}
    assert skipped["flux1-dev"] == "not a text model: flux"
    assert skipped["noarch"] == "no general.architecture"


def test_split_sets_are_one_model(tmp_path: Path) -> None:
    root = tmp_path / "m"
    for i in (1, 2, 3):
        write_gguf(
            root / f"GLM-4.6-Q4_K_M-0000{i}-of-00003.gguf", "glm4moe", layers=2, size_bytes=1000 * i
        )
    write_gguf(root / "broken-00002-of-00002.gguf", "llama", layers=1)
    write_gguf(root / "partial-00001-of-00003.gguf", "llama", layers=1)
    found = run(tmp_path, root)
    (model,) = found.models
    assert (model.id, model.shards, model.size_bytes) == ("glm-4.6-q4_k_m", 3, 6000)
    assert model.path.endswith("-00001-of-00003.gguf")
    skipped = {s.id: s.reason for s in found.skipped}
    assert skipped == {
        "broken": "split gguf set without its first shard",
        "partial": "split gguf set has 1 of 3 shards",
    }


def test_hf_rules(tmp_path: Path) -> None:
    root = tmp_path / "hf"
    write_hf(root / "Llama-3-8B-Instruct", LLAMA3_8B)
    write_hf(root / "Qwen2.5-7B-Instruct-AWQ", QWEN2_AWQ)
    write_hf(root / "gemma-3-4b-it", GEMMA3_WRAPPER)
    write_hf(root / "t5-small", T5)  # seq2seq: shares the suffix, not a chat model
    write_hf(root / "with-gguf", LLAMA3_8B)
    write_gguf(root / "with-gguf" / "conv.gguf", "llama", layers=2)  # the gguf wins
    no_weights = root / "no-weights"
    no_weights.mkdir()
    (no_weights / "config.json").write_text('{"architectures": ["LlamaForCausalLM"]}')
    write_hf(root / "Llama-3-8B-Instruct" / "nested" / "sub", QWEN2_AWQ)  # the walk goes on
    (root / "broken").mkdir()
    (root / "broken" / "config.json").write_text("{not json")
    (root / "broken" / "model.safetensors").write_bytes(b"")
    found = run(tmp_path, root)
    models = by_id(found)
    assert sorted(models) == [
        "conv",
        "gemma-3-4b-it-bf16",
        "llama-3-8b-instruct-bf16",
        "qwen2.5-7b-instruct-awq",
        "sub-awq",
    ]
    assert models["gemma-3-4b-it-bf16"].meta.block_count == 34  # type: ignore[union-attr]
    assert models["llama-3-8b-instruct-bf16"].format == "hf"
    assert [s.id for s in found.skipped] == ["broken"]
    assert found.skipped[0].reason.startswith("config.json: unreadable")


@pytest.mark.parametrize(
    ("config", "ok"),
    [
        ({"architectures": ["MistralForCausalLM"]}, True),
        ({"architectures": ["LlavaForConditionalGeneration"], "text_config": {}}, True),
        ({"architectures": ["X"], "vision_config": {"a": 1}}, False),
        ({"architectures": ["XForConditionalGeneration"], "vision_config": {"a": 1}}, True),
        ({"architectures": ["XForConditionalGeneration"], "vision_config": {}}, False),
        ({"architectures": ["WhisperForConditionalGeneration"]}, False),
        ({"architectures": ["BertModel"]}, False),
        ({}, False),
    ],
)
def test_hf_qualifies(config: dict[str, object], ok: bool) -> None:
    assert hf_qualifies(config) is ok


def test_hf_cache_layout_uses_repo_name_and_follows_links(tmp_path: Path) -> None:
    repo = tmp_path / "hub" / "models--Qwen--Qwen3-8B"
    blobs = repo / "blobs"
    blobs.mkdir(parents=True)
    blob = blobs / "abc"
    with blob.open("wb") as fh:
        fh.truncate(5000)
    snap = repo / "snapshots" / "0123456789abcdef"
    write_hf(snap, {**LLAMA3_8B, "model_type": "qwen3"}, weights=0)
    for f in snap.glob("*.safetensors"):
        f.unlink()
    os.symlink(blob, snap / "model.safetensors")
    (model,) = run(tmp_path, tmp_path / "hub").models
    assert model.id == "qwen3-8b-bf16" and model.size_bytes == 5000


def test_ids_are_unique_and_stable(tmp_path: Path) -> None:
    assert assign_ids(
        [("m", "/a/x/m.gguf"), ("m", "/a/y/m.gguf"), ("m", "/b/y/m.gguf"), ("n", "/n.gguf")]
    ) == ["m", "m-y", "m-y-2", "n"]
    root = tmp_path / "models"
    write_gguf(root / "a" / "Same.gguf", "llama", layers=1)
    write_gguf(root / "b" / "same.gguf", "llama", layers=1)
    first = [m.id for m in run(tmp_path, root).models]
    assert first == ["same", "same-b"]
    assert [m.id for m in run(tmp_path, root).models] == first


def test_symlink_cycles_and_hidden_folders(tmp_path: Path) -> None:
    root = tmp_path / "models"
    write_gguf(root / "a" / "m.gguf", "llama", layers=1)
    write_gguf(root / ".trash" / "old.gguf", "llama", layers=1)
    os.symlink(root, root / "a" / "loop")
    assert [m.id for m in run(tmp_path, root).models] == ["m"]


def test_cache_makes_a_warm_scan_read_no_header(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "models"
    write_gguf(root / "m.gguf", "llama", layers=1)
    run(tmp_path, root)
    import backendmgr.discovery.gguf as gguf  # the walk loads the reader on a miss only

    def boom(path: Path) -> dict[str, object]:
        raise AssertionError("header read on a warm scan")

    monkeypatch.setattr(gguf, "read_gguf_metadata", boom)
    assert [m.id for m in run(tmp_path, root).models] == ["m"]
    (root / "m.gguf").touch()
    os.utime(root / "m.gguf", (1, 1))
    with pytest.raises(AssertionError, match="warm scan"):
        run(tmp_path, root)


@pytest.mark.parametrize(
    "body",
    [
        '{"format": 1, "entries": {"P": 5}}',  # an entry of the wrong shape
        '{"format": 1, "entries": {"P": [S, M]}}',
        '{"format": 1, "entries": {"P": [S, M, 3]}}',  # a header is a mapping or a reason
        '{"format": 1, "entries": {"P": [S, M, [1]]}}',
        '{"format": 1, "entries": {"P": [S, M, null]}}',
        '{"format": 1, "entries": {"P": ["S", M, {}]}}',
        '{"format": 1, "entries": {"P": [S, M, {}, 4]}}',
        '{"format": 1, "entries": {"P": {"0": S, "1": M, "2": {}}}}',
        '{"format": 1, "entries": {"P": [S.0, M, {}]}}',
        '{"format": 1, "entries": []}',
        '{"format": 1, "entries": {}, "more": 1}',
        '{"format": 2, "entries": {"P": [S, M, "x"]}}',  # another version's cache
        "[1]",
        "{",
    ],
)
def test_a_malformed_cache_is_read_again_from_the_files(tmp_path: Path, body: str) -> None:
    root = tmp_path / "models"
    write_gguf(root / "m.gguf", "llama", layers=1)
    path = str(root / "m.gguf")
    st = os.stat(path)
    body = body.replace("P", path).replace("S", str(st.st_size)).replace("M", str(st.st_mtime_ns))
    (tmp_path / "cache.json").write_text(body)
    found = run(tmp_path, root)
    assert [m.id for m in found.models] == ["m"] and found.models[0].meta is not None
    assert found.models[0].meta.architecture == "llama"
    entries = json.loads((tmp_path / "cache.json").read_text())["entries"]
    assert list(entries) == [path] and entries[path][2]["general.architecture"] == "llama"


def test_a_cached_header_is_used_as_it_was_stored(tmp_path: Path) -> None:
    """The control for the test above: the same file with a good entry is not read again."""
    root = tmp_path / "models"
    write_gguf(root / "m.gguf", "llama", layers=1)
    path = str(root / "m.gguf")
    st = os.stat(path)
    header = {"general.architecture": "qwen3", "qwen3.context_length": 77}
    body = {"format": 1, "entries": {path: [st.st_size, st.st_mtime_ns, header]}}
    (tmp_path / "cache.json").write_text(json.dumps(body))
    (model,) = run(tmp_path, root).models
    assert model.meta is not None and model.meta.architecture == "qwen3"
    assert model.meta.context_length == 77


def test_unsafe_char_reads_ascii_as_the_unicode_categories_do() -> None:
    """The ASCII shortcut (a printable ASCII text holds nothing unsafe) agrees with the
    categories for every ASCII character, alone and inside a name, and leaves the rest to them."""
    import unicodedata

    from backendmgr.discovery.chars import unsafe_char

    for code in range(128):
        ch = chr(code)
        unsafe = unicodedata.category(ch) in {"Cc", "Cf", "Cs", "Zl", "Zp"}
        expected = f"U+{code:04X}" if unsafe else None
        assert unsafe_char(ch) == expected
        assert unsafe_char(f"model{ch}name.gguf") == expected
    assert unsafe_char("caf\u00e9\u202ename") == "U+202E"  # not ASCII: a bidi override
    assert unsafe_char("caf\u00e9 \u00a0name") is None


def _fields(value: Any) -> Any:
    """A walk's record (a plain class with slots, its header's too) as its fields, at every
    depth, so two records compare by what they hold."""
    if isinstance(value, list):
        return [_fields(v) for v in value]
    slots = getattr(type(value), "__slots__", None)
    if slots is None or isinstance(value, tuple):
        return value
    return {name: _fields(getattr(value, name)) for name in slots}


def test_keeping_one_model_and_listing_ids_agree_with_the_whole_discovery(
    tmp_path: Path,
) -> None:
    """``which MODEL`` makes one model's record and <TAB> none; each id is still the one the
    whole discovery gives (clashes, projectors, split sets, skips and HF folders included)."""
    from backendmgr.discovery.walk import discover_ids

    root = tmp_path / "models"
    write_gguf(root / "a" / "chat.gguf", "llama", layers=2)
    write_gguf(root / "a" / "mmproj-chat.gguf", "clip", general_type="mmproj", layers=1)
    write_gguf(root / "b" / "chat.gguf", "llama", layers=2)  # clashes: chat-b
    write_gguf(root / "b" / "emb.gguf", "bert", layers=2, pooling=1)
    write_gguf(root / "c" / "big-00001-of-00002.gguf", "llama", layers=2)
    write_gguf(root / "c" / "big-00002-of-00002.gguf", "llama", layers=2)
    write_gguf(root / "c" / "img.gguf", "flux", layers=1)
    (root / "c" / "junk.gguf").write_bytes(b"not a gguf")
    write_hf(root / "hf" / "Qwen2-7B", LLAMA3_8B)
    scan = scan_folders([str(root)])
    whole = discover(scan, tmp_path / "cache.json")
    ids = [m.id for m in whole.models] + [s.id for s in whole.skipped]
    assert len(ids) == len(set(ids)) == 7
    assert sorted(discover_ids(scan, tmp_path / "cache.json")) == sorted(ids)
    for model in whole.models:
        one = discover(scan, tmp_path / "cache.json", keep=model.id.__eq__)
        # the records compare by their fields: they are no dict keys, so they make no __eq__
        assert _fields(one.models) == _fields([model])
        assert _fields(one.skipped) == _fields(whole.skipped)
    assert discover(scan, tmp_path / "cache.json", keep=lambda _: False).models == []
    chat = next(m for m in whole.models if m.path.endswith("/a/chat.gguf"))
    assert chat.mmproj is not None and chat.mmproj.endswith("mmproj-chat.gguf")


def test_lower_case_makes_no_unsafe_character() -> None:
    """Discovery checks a GGUF's path once: its id, a lower-cased part of the path, is as safe
    only because ``str.lower`` maps no safe character to one an id may not hold."""
    import sys
    import unicodedata

    from backendmgr.discovery.chars import unsafe_char

    made = [
        hex(i)
        for i in range(sys.maxunicode + 1)
        if unicodedata.category(chr(i)) not in {"Cc", "Cf", "Cs", "Zl", "Zp"}
        and chr(i).lower() != chr(i)
        and unsafe_char(chr(i).lower()) is not None
    ]
    assert made == []


def test_a_quant_method_that_is_no_name_leaves_the_id_to_the_dtype(tmp_path: Path) -> None:
    """A crafted ``quant_method`` of 3 000 characters once made a 3 006-character id that
    ``set`` and ``pin`` refuse: a model no one could configure."""
    root = tmp_path / "hf"
    write_hf(root / "long", {**QWEN2_AWQ, "quantization_config": {"quant_method": "q" * 3000}})
    write_hf(root / "spaced", {**QWEN2_AWQ, "quantization_config": {"quant_method": "a b/c"}})
    write_hf(root / "fine", {**QWEN2_AWQ, "quantization_config": {"quant_method": "fp8"}})
    assert sorted(by_id(run(tmp_path, root))) == ["fine-fp8", "long-f16", "spaced-f16"]
