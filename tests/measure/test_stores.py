"""``tuned.json`` and ``bench.json`` read back without pydantic (issue 30): a record written is
the record read, a record of the wrong shape is passed over (its neighbours still count), keys
another version added are left out, and a file that is not ours reads as empty."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from backendmgr.config.paths import Paths
from backendmgr.measure.bench import BenchRecord, BenchStore, matching
from backendmgr.measure.tuned import TunedRecord, TunedStore, find_tuned
from backendmgr.record import plain

KEY = ("mfp", "bfp", "cpu")


def tuned(**changes: Any) -> TunedRecord:
    fields: dict[str, Any] = {
        "model": "chat",
        "ctx": 8192,
        "measured_gib": 1.5,
        "measured_by": "rocm-smi",
        "budget_gib": 8.0,
        "build": "llama-server@b1-cpu",
        "device": "cpu",
        "model_fp": "mfp",
        "build_fp": "bfp",
        "tuned_at": "2026-01-01T00:00:00+00:00",
        "attempts": 3,
    }
    return TunedRecord(**{**fields, **changes})


def bench(**changes: Any) -> BenchRecord:
    fields: dict[str, Any] = {
        "model": "chat",
        "build": "llama-server@b1-cpu",
        "device": "cpu",
        "prompt_per_second": None,
        "predicted_per_second": 40.5,
        "runs": 3,
        "prompt_words": 200,
        "predicted_tokens": 64,
        "measured_by": "usage and wall clock",
        "argv": ["llama-server", "-m", "x"],
        "model_fp": "mfp",
        "build_fp": "bfp",
        "benched_at": "2026-01-01T00:00:00+00:00",
    }
    return BenchRecord(**{**fields, **changes})


@pytest.fixture
def paths(tmp_path: Path) -> Paths:
    return Paths(config_file=tmp_path / "config.yaml", home=tmp_path / "home")


def test_what_is_written_is_what_is_read(paths: Paths) -> None:
    store = TunedStore(paths)
    store.put_many([tuned(), tuned(build_fp="other", ctx=4096)])
    assert plain(find_tuned(store.records(), "chat", KEY)) == plain(tuned())
    assert plain(find_tuned(store.records(), "chat", ("mfp", "other", "cpu"))) == plain(
        tuned(build_fp="other", ctx=4096)
    )
    benches = BenchStore(paths)
    benches.put(bench())
    assert plain(matching(benches.records(), "chat", "mfp", "cpu")) == [plain(bench())]
    assert matching(benches.records(), "chat", "mfp", "gpu") == []


@pytest.mark.parametrize(
    "bad",
    [
        {"ctx": "8192"},  # what we wrote is never converted
        {"ctx": None},
        {"measured_gib": True},
        {"ctx": 0.5},
        {"tuned_at": 5},
    ],
)
def test_a_record_of_the_wrong_shape_is_passed_over(paths: Paths, bad: dict[str, Any]) -> None:
    store = TunedStore(paths)
    good = plain(tuned(build_fp="x"))
    broken = {**plain(tuned()), **bad}
    paths.home.mkdir(parents=True)
    body = {"version": 1, "models": {"chat": [broken, good, "junk", 5]}}
    store.path.write_text(json.dumps(body))
    assert find_tuned(store.records(), "chat", KEY) is None
    assert plain(find_tuned(store.records(), "chat", ("mfp", "x", "cpu"))) == plain(
        tuned(build_fp="x")
    )


def test_keys_another_version_added_are_left_out_and_a_missing_default_is_kept(
    paths: Paths,
) -> None:
    paths.home.mkdir(parents=True)
    raw = {**plain(tuned()), "new_field": [1]}
    del raw["attempts"]
    stored = {"version": 1, "models": {"chat": [raw]}}
    (paths.home / "tuned.json").write_text(json.dumps(stored))
    store = TunedStore(paths)
    assert plain(find_tuned(store.records(), "chat", KEY)) == plain(tuned(attempts=0))
    raw_bench = {**plain(bench()), "later": True}
    (paths.home / "bench.json").write_text(
        json.dumps({"version": 1, "models": {"chat": [raw_bench]}})
    )
    assert plain(matching(BenchStore(paths).records(), "chat", "mfp", "cpu")) == [plain(bench())]


@pytest.mark.parametrize(
    "body", ["{", "[]", '{"version": 2, "models": {}}', '{"version": 1, "models": []}', ""]
)
def test_a_file_that_is_not_ours_reads_as_empty(paths: Paths, body: str) -> None:
    paths.home.mkdir(parents=True)
    (paths.home / "tuned.json").write_text(body)
    store = TunedStore(paths)
    assert store.records() == {} and find_tuned(store.records(), "chat", KEY) is None
    store.put(tuned())  # and the next record replaces it
    assert plain(find_tuned(store.records(), "chat", KEY)) == plain(tuned())
