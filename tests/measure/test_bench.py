"""``bench`` (issue 32) against stand-in servers whose speed differs per build: real installs
from the loopback mirror, each build's llama-server replaced by a stand-in reporting the
``timings`` the test sets."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from backendmgr.mirror import MirrorServer
from tests.support import publish_llama
from tests.support.cli import Cli, error_line, ok
from tests.support.ggufs import write_gguf
from tests.support.measure_standins import write_server
from tests.support.processes import assert_none_left, pids_in, recorded_pids

MIB = 1 << 20
FAST = {"prompt_per_second": 800.0, "predicted_per_second": 40.0}
SLOW = {"prompt_per_second": 560.0, "predicted_per_second": 28.0}


class Builds:
    """Installed llama.cpp builds (cpu variant) whose servers the test makes fast or slow."""

    def __init__(self, tmp_path: Path, cli: Cli) -> None:
        self.home = tmp_path / "home"
        self.fake = tmp_path / "fake"
        self.models = tmp_path / "models"
        self.cli = cli

    def server(self, tag: str, **behaviour: Any) -> None:
        folder = self.home / "builds" / "llama-server" / f"{tag}-cpu" / "build" / "bin"
        write_server(folder / "llama-server", name=tag, **behaviour)

    def json(self, *args: str) -> Any:
        result = self.cli("--json", *args)
        assert "Traceback" not in result.err, result.err
        return json.loads(result.out)

    def none_left(self) -> bool:
        assert_none_left(pids_in(self.fake / "pids"))
        return True


def install(
    b: Builds, mirror_root: Path, tags: list[str], config_path: Path, extra: str = "-t 2"
) -> None:
    write_gguf(b.models / "chat.gguf", "qwen3", layers=4, ctx=8192, size_bytes=MIB)
    config_path.parent.mkdir(parents=True, exist_ok=True)
    config_path.write_text(
        json.dumps({"models_dirs": [str(b.models)], "models": {"chat": {"extra_args": extra}}})
    )
    for i, tag in enumerate(tags):
        publish_llama(mirror_root, tag, ["cpu"], published_at=f"2026-09-{i + 1:02d}T00:00:00Z")
    for tag in tags:
        ok(b.cli("install", "llama-server", tag, "--variant", "cpu", "--no-generate"))


@pytest.fixture
def one(
    tmp_path: Path,
    cli: Cli,
    mirror: MirrorServer,
    mirror_root: Path,
    config_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Builds:
    """b100 installed and activated (fast), nothing else."""
    builds = Builds(tmp_path, cli)
    install(builds, mirror_root, ["b100"], config_path)
    builds.server("b100", timings=FAST)
    builds.fake.mkdir()
    monkeypatch.setenv("FAKE_DIR", str(builds.fake))
    monkeypatch.setenv("BACKENDMGR_GPU", "none")
    return builds


@pytest.fixture
def b(one: Builds, mirror_root: Path) -> Builds:
    """b100 (fast, activated) and b200 (30 % slower)."""
    publish_llama(mirror_root, "b200", ["cpu"], published_at="2026-09-02T00:00:00Z")
    ok(one.cli("install", "llama-server", "b200", "--variant", "cpu", "--no-generate"))
    one.server("b200", timings=SLOW)
    return one


def test_bench_records_and_shows_figures_per_build(b: Builds) -> None:
    records = b.json("bench", "chat", "--build", "b100", "--build", "llama-server@b200-cpu")
    got = {r["build"]: r for r in records}
    assert set(got) == {"llama-server@b100-cpu", "llama-server@b200-cpu"}
    assert got["llama-server@b100-cpu"]["predicted_per_second"] == 40.0
    assert got["llama-server@b100-cpu"]["prompt_per_second"] == 800.0
    assert got["llama-server@b200-cpu"]["predicted_per_second"] == 28.0
    for r in records:
        assert r["ok"] and r["runs"] == 3 and r["predicted_spread"] == 0.0
        assert r["prompt_words"] == 256 and r["prompt_tokens"] == 256
        assert r["predicted_tokens"] == 64
        assert r["device"] == "cpu"
    assert b.none_left()

    (model,) = b.json("models")
    shown = {f["build"]: f for f in model["bench"]}
    assert shown["llama-server@b200-cpu"]["predicted_per_second"] == 28.0
    assert shown["llama-server@b100-cpu"]["prompt_per_second"] == 800.0
    text = b.cli("models").out
    assert "bench llama-server@b200-cpu: prompt 560 t/s, generation 28 t/s" in text

    # a new bench of one build replaces that build's figures only
    b.server("b200", timings={"prompt_per_second": 700.0, "predicted_per_second": 35.0})
    (again,) = b.json("bench", "chat", "--build", "b200", "--repeat", "1")
    assert again["predicted_per_second"] == 35.0 and again["runs"] == 1
    (model,) = b.json("models")
    shown = {f["build"]: f["predicted_per_second"] for f in model["bench"]}
    assert shown == {"llama-server@b100-cpu": 40.0, "llama-server@b200-cpu": 35.0}


def test_bench_without_build_uses_the_resolved_one_and_says_what_failed(b: Builds) -> None:
    (record,) = b.json("bench", "chat", "--repeat", "2")
    assert record["build"] == "llama-server@b100-cpu"  # the first install is activated
    b.server("b200", fail="lib")
    result = b.cli("bench", "chat", "--build", "b200")
    assert result.code == 1
    assert "chat on llama-server@b200-cpu: not benched" in result.out
    assert "could not be benched" in error_line(result)
    assert b.none_left()


@pytest.mark.parametrize(
    ("args", "code", "said"),
    [  # a build that is not installed is the world's refusal, as for activate and which
        (["--build", "b999"], 2, "llama-server@b999-cpu is not installed"),
        (["--build", "nope@1"], 2, "nope@1 is not installed"),
        (["--repeat", "0"], 2, "--repeat"),
        (["nomodel"], 2, 'no model "nomodel"'),
        (["--build", "b100", "stray"], 2, "unrecognized arguments: stray"),
    ],
)
def test_bench_refuses_and_records_nothing(
    b: Builds, args: list[str], code: int, said: str
) -> None:
    result = b.cli("bench", "chat", *args)
    assert result.code == code, result
    assert said in result.err
    assert not (b.home / "bench.json").exists()


def test_ctrl_c_during_bench_records_nothing_and_leaves_nothing(b: Builds) -> None:
    b.server("b100", timings=FAST, slow=30)
    proc = subprocess.Popen(
        [sys.executable, "-m", "backendmgr", "bench", "chat", "--timeout", "60"],
        env={**os.environ},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        recorded_pids(b.fake / "pids", proc=proc)
        time.sleep(1.0)  # healthy and inside the slow run
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, (out, err)
    assert "Traceback" not in err
    assert b.none_left()
    assert not (b.home / "bench.json").exists()


def registry_state(b: Builds, config_path: Path) -> Any:
    """What a roll-back must leave as it was: the activated build and every model setting."""
    from ruamel.yaml import YAML

    doc = YAML(typ="safe").load(config_path.read_text())
    builds = {r["id"]: r["activated"] for r in b.json("list")}
    return builds, doc.get("models"), [r.get("path") for r in doc.get("backends", [])]


def test_canary_on_a_build_30_percent_slower_rolls_back_with_nothing_changed(
    b: Builds, config_path: Path
) -> None:
    before = registry_state(b, config_path)
    result = b.cli("--json", "activate", "llama-server@b200-cpu", "--canary", "chat")
    assert result.code == 1, result
    report = json.loads(result.out)
    assert report["promoted"] is False and report["previous"] == "llama-server@b100-cpu"
    (row,) = report["comparison"]
    assert row["old"]["predicted_per_second"] == 40.0
    assert row["new"]["predicted_per_second"] == 28.0
    assert row["slower_pct"] == {"prompt_per_second": 30.0, "predicted_per_second": 30.0}
    assert "generation 30 % slower" in row["problems"]
    assert registry_state(b, config_path) == before
    assert not (b.home / "canary.json").exists()
    assert b.none_left()

    text = b.cli("activate", "llama-server@b200-cpu", "--canary", "chat")
    assert text.code == 1
    assert (
        "chat: llama-server@b100-cpu: prompt 800 t/s, generation 40 t/s | "
        "llama-server@b200-cpu: prompt 560 t/s, generation 28 t/s (30 % slower)"
    ) in text.out
    assert error_line(text).startswith("error: rolled back: llama-server@b100-cpu stays activated")


def test_canary_within_tolerance_promotes_and_drops_its_pins(b: Builds, config_path: Path) -> None:
    b.server("b200", timings={"prompt_per_second": 780.0, "predicted_per_second": 39.0})  # -2.5 %
    report = b.json("activate", "llama-server@b200-cpu", "--canary", "chat", "--repeat", "1")
    assert report["promoted"] is True, report
    assert report["comparison"][0]["slower_pct"]["predicted_per_second"] == 2.5
    activated = [r["id"] for r in b.json("list") if r["activated"]]
    assert activated == ["llama-server@b200-cpu"]
    from ruamel.yaml import YAML

    models = YAML(typ="safe").load(config_path.read_text())["models"]
    assert "backend" not in models["chat"]  # the temporary pin is gone
    assert models["chat"]["extra_args"] == "-t 2"
    assert not (b.home / "canary.json").exists()

    # a tighter tolerance would have refused the same figures
    b.server("b100", timings={"prompt_per_second": 780.0, "predicted_per_second": 38.0})
    tight = b.cli("activate", "llama-server@b100-cpu", "--canary", "chat", "--tolerance", "1")
    assert tight.code == 1, tight  # 39 → 38 t/s is 2.6 % slower
    assert [r["id"] for r in b.json("list") if r["activated"]] == ["llama-server@b200-cpu"]


def test_a_canary_that_fails_to_start_rolls_back(b: Builds, config_path: Path) -> None:
    b.server("b200", fail="lib")
    before = registry_state(b, config_path)
    report = json.loads(b.cli("--json", "activate", "llama-server@b200", "--canary", "chat").out)
    assert report["promoted"] is False
    assert report["verified"] == {"chat": False}
    assert registry_state(b, config_path) == before


def publish_speed(mirror_root: Path, tag: str, day: int, timings: dict[str, float]) -> None:
    """Release ``tag`` (cpu) whose llama-server is a stand-in reporting ``timings``."""
    from tests.support.archives import Entry, llama_entries, make_tar
    from tests.support.measure_standins import server_text
    from tests.support.releases import LLAMA_REPO, publish

    script = server_text(name=tag, timings=timings).encode()
    entries = [
        Entry(e.name, script, mode=0o755) if e.name.endswith("/llama-server") else e
        for e in llama_entries(tag)
    ]
    name = f"llama-{tag}-bin-ubuntu-x64.tar.gz"
    published = f"2026-10-{day:02d}T00:00:00Z"
    publish(mirror_root, LLAMA_REPO, tag, {name: make_tar(entries)}, published_at=published)


def test_bisect_over_16_releases_names_the_11th_with_at_most_6_installs(
    one: Builds, mirror_root: Path
) -> None:
    b = one
    tags = [f"b{101 + i}" for i in range(16)]
    for i, tag in enumerate(tags):
        publish_speed(mirror_root, tag, i + 1, SLOW if i >= 10 else FAST)  # slower from the 11th
    builds_before = [r["id"] for r in b.json("list")]

    result = b.cli("--json", "bisect", "chat", "--good", "b101", "--bad", "b116", "--repeat", "1")
    assert result.code == 0, result
    report = json.loads(result.out)
    assert report["first_bad"]["tag"] == "b111" and report["last_good"]["tag"] == "b110"
    assert report["first_bad"]["predicted_per_second"] == 28.0
    assert report["last_good"]["predicted_per_second"] == 40.0
    assert report["releases"] == 16
    assert 2 <= len(report["installs"]) <= 6  # ⌈log2 16⌉ + 2
    assert sorted(report["removed"]) == sorted(report["installs"])
    assert [r["id"] for r in b.json("list")] == builds_before  # the search's builds are gone
    md = report["report"]
    assert "First bad release: **b111**; last good: **b110**" in md
    assert "| b111 | yes | 560 | 28 |" in md
    assert "b111-cpu/build/bin/llama-server" in md and "Host: " in md
    assert b.none_left()

    kept = b.cli("bisect", "chat", "--good", "b101", "--bad", "b116", "--repeat", "1", "--keep")
    assert kept.code == 0, kept
    assert "## chat: generation speed regressed in b111" in kept.out
    assert len(b.json("list")) > len(builds_before)


def test_bisect_refuses_a_bad_end_that_is_not_bad(one: Builds, mirror_root: Path) -> None:
    b = one
    for i, tag in enumerate(["b101", "b102"]):
        publish_speed(mirror_root, tag, i + 1, FAST)
    result = b.cli("bisect", "chat", "--good", "b101", "--bad", "b102", "--repeat", "1")
    assert result.code == 1, result
    assert "--bad b102 is not bad" in error_line(result)
    starts = b.cli("bisect", "chat", "--good", "b101", "--bad", "b102", "--metric", "starts")
    assert error_line(starts) == "error: --bad b102 is not bad: chat starts on it"
    assert [r["id"] for r in b.json("list")] == ["llama-server@b100-cpu"]
    wrong = b.cli("bisect", "chat", "--good", "b102", "--bad", "b101")
    assert wrong.code == 2 and "must be an older release" in wrong.err


HELP = """usage: llama-server [options]
  -m,    --model FNAME        model path
  --host HOST                 ip address to listen
  --port PORT                 port to listen
  -c,    --ctx-size N         size of the prompt context
  -ngl,  --gpu-layers N       layers to store in VRAM
  -t,    --threads N          number of threads
  --jinja                     use jinja template
"""


def test_a_build_without_a_flag_extra_args_uses_refuses_the_switch(
    tmp_path: Path, cli: Cli, mirror_root: Path, config_path: Path, mirror: MirrorServer
) -> None:
    b = Builds(tmp_path, cli)
    write_gguf(b.models / "chat.gguf", "qwen3", layers=4, ctx=8192, size_bytes=MIB)
    config_path.parent.mkdir(parents=True, exist_ok=True)
    models = {"chat": {"extra_args": "-t 2 -dio"}}  # -dio: removed from llama.cpp at b200
    config_path.write_text(json.dumps({"models_dirs": [str(b.models)], "models": models}))
    old_help = HELP + "  -dio,  --direct-io          use direct I/O\n"
    publish_llama(mirror_root, "b100", ["cpu"], help_text=old_help)
    publish_llama(mirror_root, "b200", ["cpu"], help_text=HELP)
    for tag in ("b100", "b200"):
        ok(b.cli("install", "llama-server", tag, "--variant", "cpu"))
    before = config_path.read_text()

    def activated() -> list[str]:
        return [r["id"] for r in b.json("list") if r["activated"]]

    refused = b.cli("activate", "llama-server@b200-cpu")
    assert refused.code == 1, refused
    assert error_line(refused) == (
        "error: chat: -dio is not an option of llama-server@b200-cpu (its extra_args); "
        "nothing was switched (--force switches anyway)"
    )
    assert activated() == ["llama-server@b100-cpu"] and config_path.read_text() == before

    pinned = b.cli("pin", "chat", "llama-server@b200-cpu")
    assert pinned.code == 1 and "-dio is not an option of llama-server@b200-cpu" in pinned.err
    assert config_path.read_text() == before
    canary = b.cli("activate", "llama-server@b200-cpu", "--canary", "chat")
    assert canary.code == 1 and "-dio is not an option" in canary.err
    # the way out it names is one the canary takes (it refuses --force)
    assert error_line(canary).endswith(
        "nothing was switched (a canary keeps no such flag; without --canary, "
        "activate llama-server@b200-cpu --force)"
    ), canary.err
    assert config_path.read_text() == before

    forced = b.cli("activate", "llama-server@b200-cpu", "--force")
    assert forced.code == 0, forced
    assert "warning: kept with --force: chat: -dio is not an option of" in forced.err
    assert activated() == ["llama-server@b200-cpu"]

    ok(b.cli("pin", "chat", "llama-server@b100-cpu"))  # a build that lists -dio
    pinned_here = config_path.read_text()
    to_row = b.cli("pin", "chat", "llama-server")  # the component's row runs b200: a switch too
    assert "chat: -dio is not an option of llama-server@b200-cpu" in error_line(to_row)
    assert config_path.read_text() == pinned_here
    assert b.cli("pin", "chat", "llama-server", "--force").code == 0
    ok(b.cli("pin", "chat", "llama-server@b100-cpu"))
    unpinned = b.cli("unpin", "chat")  # back onto b200: unpin has no --force, so it warns
    assert (
        unpinned.code == 0
        and ("warning: unpinned anyway: chat: -dio is not an option of llama-server@b200-cpu")
        in unpinned.err
    ), unpinned
    assert b.cli("unpin", "not-a-model").code == 0  # an id discovery does not know: no check

    near = b.cli("set", "chat", "extra_args=-t 2 --threadz")  # the nearest option is named
    assert near.code == 0 and "--threadz is not an option of" in near.err, near
    assert "did you mean --threads?" in near.err, near.err
    many = " ".join(f"--f{i}" for i in range(20_000)) + " --" + "a" * 100_000
    flood = b.cli("set", "chat", f"extra_args={many}")  # ten flags named, each cut short
    assert flood.code == 0 and len(flood.err.splitlines()) == 10 and len(flood.err) < 2000
    said = b.cli("set", "chat", "extra_args=-t 2 --no-such-flag")
    assert said.code == 0, said
    assert (
        "warning: --no-such-flag is not an option of llama-server@b200-cpu, which chat runs on"
        in said.err
    )


def test_update_canary_installs_the_newest_and_lets_the_canary_decide(
    one: Builds, mirror_root: Path, config_path: Path
) -> None:
    from ruamel.yaml import YAML

    def used() -> Any:  # the models' settings and the row every unpinned model follows
        doc = YAML(typ="safe").load(config_path.read_text())
        return doc["models"], [r for r in doc["backends"] if r["id"] == "llama-server"]

    publish_speed(mirror_root, "b200", 1, SLOW)
    before = used()
    rolled = one.cli("--json", "update", "--canary", "chat", "--repeat", "1")
    assert rolled.code == 1, rolled
    assert json.loads(rolled.out)["build"] == "llama-server@b200-cpu"
    listed = {r["id"]: r["activated"] for r in one.json("list")}
    assert listed == {"llama-server@b100-cpu": True, "llama-server@b200-cpu": False}
    assert used() == before  # the new build stays installed (its own row), unused

    publish_speed(mirror_root, "b300", 2, FAST)
    promoted = one.json("update", "llama-server", "--canary", "chat", "--repeat", "1")
    assert promoted["promoted"] is True and promoted["build"] == "llama-server@b300-cpu"
    assert [r["id"] for r in one.json("list") if r["activated"]] == ["llama-server@b300-cpu"]
    same = one.cli("update", "--canary", "chat")
    assert same.code == 0 and "already the newest" in same.out


CANARY = ("--canary", "chat", "--timeout", "60")


@pytest.mark.parametrize("presses", [1, 3])
def test_ctrl_c_during_a_canary_puts_the_pins_back(
    b: Builds, config_path: Path, presses: int
) -> None:
    """The first Ctrl-C cancels; asyncio raises KeyboardInterrupt at the next, wherever the
    undo is: pressed again, the pins, the mark and the started server are undone whole too."""
    from ruamel.yaml import YAML

    b.server("b200", timings=SLOW, slow=30)
    before = registry_state(b, config_path)
    proc = subprocess.Popen(
        [sys.executable, "-m", "backendmgr", "activate", "llama-server@b200-cpu", *CANARY],
        env={**os.environ},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        marked = b.home / "canary.json"
        recorded_pids(b.fake / "pids", 3, proc=proc)  # verify's start, then the two benches
        assert marked.exists()
        pinned = YAML(typ="safe").load(config_path.read_text())["models"]["chat"]
        assert pinned.get("backend") == "llama-server@b200-cpu"  # the temporary pin
        time.sleep(1.0)
        for _ in range(presses):
            proc.send_signal(signal.SIGINT)
            time.sleep(0.02)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    # a press that lands once the undo is over ends it by the signal (a shell says 130 too)
    assert proc.returncode in ((130,) if presses == 1 else (130, -signal.SIGINT)), (out, err)
    assert "Traceback" not in err
    assert registry_state(b, config_path) == before
    assert not marked.exists()
    assert b.none_left()


def test_a_canary_that_never_finished_is_named_before_another_starts(
    b: Builds, config_path: Path
) -> None:
    mark = b.home / "canary.json"
    mark.write_text(json.dumps({"build": "llama-server@b200-cpu", "pins_before": {"chat": None}}))
    before = registry_state(b, config_path)
    result = b.cli("activate", "llama-server@b200-cpu", "--canary", "chat")
    assert result.code == 1
    assert error_line(result) == (
        "error: an earlier canary of llama-server@b200-cpu did not finish and left temporary "
        f"pins; undo them (backendmgr unpin chat) and remove {mark}"
    )
    assert registry_state(b, config_path) == before and mark.exists()

    # its pid now belongs to another process (this one), started at another time: not it
    reused = {"pid": os.getpid(), "started": "1"}
    mark.write_text(json.dumps({"build": "llama-server@b200-cpu", "pins_before": {}, **reused}))
    assert "did not finish" in error_line(b.cli("activate", "llama-server@b200", *CANARY))


# --- servers that answer badly (issue 32's adversarial pass): NaN or infinite figures, not
# JSON, megabytes, one byte at a time so that no per-read timeout fires. Each is one failed run
# with a reason, in bounded time, with nothing recorded or left running.

NAN = math.nan


def strict_json(text: str) -> Any:
    """``text`` as JSON proper: NaN and Infinity are not JSON, whatever Python writes."""

    def refuse(constant: str) -> Any:
        raise AssertionError(f"{constant} in the output")

    return json.loads(text, parse_constant=refuse)


@pytest.mark.parametrize(
    ("behaviour", "reason"),
    [
        ({"timings": {"prompt_per_second": NAN, "predicted_per_second": NAN}}, "without timings"),
        ({"timings": {"predicted_per_second": math.inf}}, "without timings"),
        ({"timings": {"predicted_per_second": -3.0}}, "without timings"),
        ({"timings": {"predicted_per_second": "40"}}, "without timings"),
        (  # counts that no int() takes
            {"timings": {"predicted_per_second": 40.0, "predicted_n": math.inf, "prompt_n": NAN}},
            None,
        ),
        ({"answer": "not json"}, "no figures in the answer"),
        ({"answer": "[" * 200_000}, "no figures in the answer"),  # deeper than json parses
        ({"flood": 40}, "answered more than 1024 KiB"),
        ({"drip": 0.3}, "no whole answer within 3 s"),
        ({"timings": {"predicted_per_second": 1.0}, "slow": 600}, "no whole answer within 3 s"),
        ({"drip_health": 0.3}, "not healthy within 4 s"),
    ],
)
def test_a_server_that_answers_badly_is_one_failed_run_in_bounded_time(
    b: Builds, monkeypatch: pytest.MonkeyPatch, behaviour: dict[str, Any], reason: str | None
) -> None:
    import backendmgr.measure.bench as measured

    monkeypatch.setattr(measured, "REQUEST_TIMEOUT_S", 3.0)  # a run's bound, in all
    b.server("b100", **behaviour)
    started = time.monotonic()
    result = b.cli("--json", "bench", "chat", "--repeat", "1", "--timeout", "4")
    assert time.monotonic() - started < 20, "a dripping server must not hold the run"
    assert "Traceback" not in result.err and "internal error" not in result.err, result
    (record,) = strict_json(result.out)
    if reason is None:  # the speed is a figure; the counts that were not are unknown
        assert result.code == 0 and record["predicted_per_second"] == 40.0, record
        assert record["predicted_tokens"] == 0 and record["prompt_tokens"] is None
    else:
        assert result.code == 1 and reason in record["reason"], record
        assert not (b.home / "bench.json").exists()
    assert b.none_left()


def test_a_canary_whose_new_build_reports_nan_rolls_back(b: Builds) -> None:
    """NaN compares as "not slower" with every tolerance: it must never promote."""
    b.server("b200", timings={"prompt_per_second": NAN, "predicted_per_second": NAN})
    result = b.cli("--json", "activate", "llama-server@b200", "--canary", "chat", "--repeat", "1")
    assert result.code == 1, result
    report = strict_json(result.out)
    assert report["promoted"] is False
    assert [r["id"] for r in b.json("list") if r["activated"]] == ["llama-server@b100-cpu"]
    assert b.none_left()


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "dangling-link", "deep"])
def test_a_canary_mark_that_is_no_file_of_ours_refuses_at_once(
    b: Builds, config_path: Path, kind: str
) -> None:
    """canary.json as a FIFO (whose open would block), a link to /dev/zero (read forever) or
    a dangling link (written through, a file would appear where it points) is refused."""
    from tests.support.cli import run_backendmgr

    mark, target = b.home / "canary.json", b.home / "elsewhere.json"
    if kind == "fifo":
        os.mkfifo(mark)
    elif kind == "dev-zero":
        mark.symlink_to("/dev/zero")
    elif kind == "dangling-link":
        mark.symlink_to(target)
    else:
        mark.write_text("[" * 100_000)
    before = registry_state(b, config_path)
    result = run_backendmgr("activate", "llama-server@b200", *CANARY, timeout=60)
    assert result.returncode == 1, result
    assert result.stderr == (
        f"error: {mark} is unreadable; remove it after checking the pins (backendmgr models)\n"
    )
    assert registry_state(b, config_path) == before
    assert not target.exists() and (mark.is_symlink() or mark.exists())


def test_two_canaries_at_once_one_runs_the_other_is_refused(b: Builds, config_path: Path) -> None:
    b.server("b200", timings=SLOW, slow=2)
    before = registry_state(b, config_path)
    argv = [sys.executable, "-m", "backendmgr", "activate", "llama-server@b200-cpu", *CANARY]
    procs = [
        subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    try:
        said = [p.communicate(timeout=120) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    assert [p.returncode for p in procs] == [1, 1], said  # one rolled back, one refused
    errors = sorted(err for _, err in said)
    assert "is running (process " in errors[0] and "wait until it is done" in errors[0], errors
    assert "error: rolled back:" in errors[1], errors
    assert registry_state(b, config_path) == before
    assert not (b.home / "canary.json").exists()
    assert b.none_left()


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["activate", "llama-server@b200-cpu", "--tolerance", "3"], "--tolerance only applies"),
        (["activate", "llama-server@b200-cpu", "--repeat", "2"], "--repeat only applies"),
        (["update", "--timeout", "9"], "--timeout only applies with --canary"),
        (["update", "--canary", "chat", "--dry-run"], "it has no --dry-run"),
        (["update", "--canary", "chat", "--force"], "--force does not apply with --canary"),
        (["activate", "llama-server@b200-cpu", "--canary", "chat", "--force"], "--force does"),
        (["update", "--canary", "chat", "--no-generate"], "--no-generate does not apply"),
    ],
)
def test_a_canary_option_that_would_be_ignored_is_a_usage_error_before_anything_changes(
    one: Builds, mirror_root: Path, config_path: Path, args: list[str], said: str
) -> None:
    """Without --canary its options would be ignored; --dry-run and --force it cannot honour.
    Refused before ``update --canary`` installs the newest build."""
    publish_speed(mirror_root, "b200", 1, SLOW)  # newer, not installed
    before = registry_state(one, config_path), sorted(p.name for p in one.home.rglob("*"))
    result = one.cli(*args)
    assert result.code == 2, result
    assert said in error_line(result, 2)
    assert (registry_state(one, config_path), sorted(p.name for p in one.home.rglob("*"))) == before


def test_bisect_with_the_same_tag_twice_is_refused_before_the_listing(one: Builds) -> None:
    result = one.cli("bisect", "chat", "--good", "b7", "--bad", "b7")  # b7 is in no listing
    assert result.code == 2, result
    said = "error: --good b7 must be an older release than --bad b7;"
    assert error_line(result, 2).startswith(said)


def test_a_canary_whose_new_build_reports_no_prompt_speed_rolls_back(b: Builds) -> None:
    """The old build's prompt speed is known, the new one's is not: "no slower" cannot be
    shown, so it does not promote (it did, comparing only generation)."""
    b.server("b200", timings={"predicted_per_second": 40.0})
    result = b.cli("--json", "activate", "llama-server@b200", "--canary", "chat", "--repeat", "1")
    assert result.code == 1, result
    (row,) = strict_json(result.out)["comparison"]
    assert row["problems"] == ["prompt speed not reported on llama-server@b200-cpu"]
    assert [r["id"] for r in b.json("list") if r["activated"]] == ["llama-server@b100-cpu"]


def test_a_server_that_prints_megabytes_is_benched_all_the_same(b: Builds) -> None:
    """Its output is pumped and only its tail kept (a line of half a MiB included)."""
    b.server("b100", timings=FAST, chatter=40)
    (record,) = strict_json(b.cli("--json", "bench", "chat", "--repeat", "1").out)
    assert record["ok"] and record["predicted_per_second"] == 40.0, record
    assert b.none_left()


@pytest.mark.parametrize(
    ("args", "code", "said"),
    [
        (["nope", "--canary", "chat"], 2, 'unknown component "nope"'),
        (["vllm", "--canary", "chat"], 1, "chat runs on llama-server, not on vllm"),
        (["--canary", "chat", "nomodel"], 2, 'no model "nomodel"'),
    ],
)
def test_update_canary_checks_every_canary_before_it_installs(
    one: Builds, mirror_root: Path, args: list[str], code: int, said: str
) -> None:
    publish_speed(mirror_root, "b200", 1, SLOW)  # newer, not installed
    result = one.cli("update", *args)
    assert said in error_line(result, code)
    assert [r["id"] for r in one.json("list")] == ["llama-server@b100-cpu"]  # nothing installed


def test_the_figures_are_never_written_through_a_link(b: Builds, tmp_path: Path) -> None:
    """bench.json linked elsewhere (to /dev/zero, as root, the device itself was replaced)."""
    victim = tmp_path / "victim"
    victim.write_text("precious")
    (b.home / "bench.json").symlink_to(victim)
    result = b.cli("bench", "chat", "--repeat", "1")
    assert "is a symbolic link" in error_line(result) and victim.read_text() == "precious"
    assert b.none_left()


def test_a_fifo_for_the_measured_contexts_hangs_no_command(b: Builds) -> None:
    from tests.support.cli import run_backendmgr

    os.mkfifo(b.home / "tuned.json")  # read for the generated config's inputs, every command
    for args in (["models"], ["generate"]):
        assert run_backendmgr(*args, timeout=60).returncode == 0
