"""The read commands' replayed output (``cli/fastread.py``) against the full path, through the
real console entry point, on homes that change under it (issue 25): the replay must be
byte-identical to what the full path prints for the same state, and must stop being used the
moment anything that output depends on changes."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from backendmgr.mirror import MirrorServer
from tests.support import publish_llama
from tests.support.cli import CliResult, run_backendmgr
from tests.support.ggufs import write_gguf

GIB = 1 << 30
TRACE = "BACKENDMGR_FASTREAD_TRACE"
READS = [
    ("list",),
    ("list", "--json"),
    ("backends",),
    ("backends", "--json"),
    ("models",),
    ("models", "--json"),
    ("which", "qwen3-8b-q4_k_m"),
    ("--json", "which", "llama-server"),
]


def read(*args: str, full: bool = False, trace: Path | None = None) -> CliResult:
    env = {"BACKENDMGR_NO_FASTREAD": "1"} if full else {}
    if trace is not None:
        env["BACKENDMGR_FASTREAD_TRACE"] = str(trace)
    proc = run_backendmgr(*args, env=env)
    return CliResult(proc.returncode, proc.stdout, proc.stderr)


def same_as_full(args: tuple[str, ...], trace: Path) -> str:
    """Run ``args`` through the fast path twice and the full path once; all three agree.
    Returns what the fast path did on its first run (``miss`` or ``hit``)."""
    trace.unlink(missing_ok=True)
    first = read(*args, trace=trace)
    second = read(*args, trace=trace)
    full = read(*args, full=True)
    assert first == full, args
    assert second == full, args
    words = trace.read_text().split() if trace.exists() else []
    if full.code == 0:
        assert words[-1] == "hit", (args, words)  # the second run was a replay
    return words[0] if words else ""


@pytest.fixture
def home(
    tmp_path: Path, config_path: Path, mirror: MirrorServer, mirror_root: Path, cli: object
) -> Path:
    """Two installed builds, a manual row, two models (one pinned), a generated config."""
    models = tmp_path / "models"
    write_gguf(models / "qwen3-8b-q4_k_m.gguf", "qwen3", layers=36, ctx=40960, size_bytes=GIB)
    write_gguf(models / "llama-3b.gguf", "llama", layers=16, ctx=8192, size_bytes=GIB // 2)
    config_path.parent.mkdir(parents=True, exist_ok=True)
    config_path.write_text(
        f"models_dirs: [{json.dumps(str(models))}]\n"
        "backends:\n  - {id: my-llama, kind: custom, path: /opt/llama/llama-server}\n"
    )
    publish_llama(mirror_root, "b100", ["vulkan"], published_at="2026-01-01T00:00:00Z")
    publish_llama(mirror_root, "b200", ["vulkan"], published_at="2026-02-01T00:00:00Z")
    run = cli  # in-process: the setup needs no interpreter start-up per step
    assert run("install", "llama-server", "b100", "--variant", "vulkan").code == 0  # type: ignore[operator]
    assert run("install", "llama-server", "b200", "--variant", "vulkan").code == 0  # type: ignore[operator]
    assert run("pin", "llama-3b", "llama-server@b100-vulkan").code == 0  # type: ignore[operator]
    return tmp_path


def test_replay_matches_the_full_path_as_the_home_changes(
    home: Path, config_path: Path, tmp_path: Path
) -> None:
    trace = tmp_path / "trace"
    for args in READS:
        same_as_full(args, trace)
    # a hand edit of the config file: the pin moves, so every output that shows it changes
    text = config_path.read_text()
    pin = "backend: llama-server@b100-vulkan"
    assert pin in text
    config_path.write_text(text.replace(pin, "backend: llama-server@b200-vulkan"))
    assert same_as_full(("list",), trace) == "miss"
    assert same_as_full(("models", "--json"), trace) == "miss"
    # a deleted build folder
    build = Path(json.loads(read("--json", "list").out)[0]["dir"])
    shutil.rmtree(build)
    assert same_as_full(("list", "--json"), trace) == "miss"
    assert same_as_full(("which", "qwen3-8b-q4_k_m"), trace) == "miss"
    # a new model file
    write_gguf(home / "models" / "new-1b.gguf", "llama", layers=8, ctx=4096, size_bytes=GIB // 4)
    assert same_as_full(("models",), trace) == "miss"
    assert "new-1b" in read("models").out
    # a context recorded by tune (issue 22): models shows tuned against estimated
    (build.parents[2] / "tuned.json").write_text(json.dumps({"version": 1, "models": {}}))
    assert same_as_full(("models",), trace) == "miss"
    # nothing changed since: the first run is already a replay
    assert same_as_full(("models",), trace) == "hit"


def test_a_stale_or_broken_memo_is_never_shown(home: Path, tmp_path: Path) -> None:
    trace = tmp_path / "trace"
    same_as_full(("backends",), trace)
    stored = sorted((home / "home" / "cache" / "reads").glob("*.json"))
    assert stored  # one file per command line
    # an entry whose fingerprint no longer matches is ignored, whatever it says
    for memo in stored:
        entry = json.loads(memo.read_text())
        entry["stdout"] = "forged\n"
        entry["fingerprint"] = "0" * 64
        memo.write_text(json.dumps(entry))
    assert "forged" not in read("backends").out
    for broken in (b"{not json", b"[]", b'{"format": 1, "spec": 5}', b"\xff" * 10):
        for memo in stored:
            memo.write_bytes(broken)
        assert read("backends") == read("backends", full=True)
    # a failure is never stored: it is reported afresh each time
    assert read("which", "nope").code == 2
    assert read("which", "nope", trace=trace).code == 2
    assert trace.read_text().split()[-1] == "miss"


def test_environment_that_shapes_the_output_is_part_of_the_key(home: Path, tmp_path: Path) -> None:
    trace = tmp_path / "trace"
    same_as_full(("models",), trace)
    trace.unlink()
    proc = run_backendmgr(
        "models", env={"BACKENDMGR_VRAM_GB": "8", "BACKENDMGR_FASTREAD_TRACE": str(trace)}
    )
    assert trace.read_text().split() == ["miss", "stored"]
    full = run_backendmgr("models", env={"BACKENDMGR_VRAM_GB": "8", "BACKENDMGR_NO_FASTREAD": "1"})
    assert proc.stdout == full.stdout


def test_a_replay_loads_no_heavy_library(home: Path) -> None:
    assert read("list").code == 0  # stores
    code = (
        "import sys\n"
        "from backendmgr.cli.main import main\n"
        "sys.argv = ['backendmgr', 'list']\n"
        "main()\n"
        "heavy = ('pydantic', 'rich', 'argparse', 'httpx', 'ruamel.yaml', 'backendmgr.manager')\n"
        "print('LOADED', *[m for m in heavy if m in sys.modules])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env=os.environ.copy(),
    )
    assert done.stdout.rpartition("LOADED")[2].split() == []
    assert "llama-server@b200-vulkan" in done.stdout


def test_only_plain_read_commands_are_replayed() -> None:
    from backendmgr.cli.fastread import Request, parse

    assert parse(["list"]) == Request("list", ())
    assert parse(["--json", "which", "--home", "/h", "m"]) == Request(
        "which", ("m",), json=True, home="/h"
    )
    assert parse(["--json", "which", "m", "--home", "/h"]) is None  # argparse refuses it
    assert parse(["--config=/c", "-q", "backends"]) == Request(
        "backends", (), quiet=True, config="/c"
    )
    for words in (
        [],
        ["install", "x"],
        ["list", "--debug"],
        ["list", "--help"],
        ["list", "a", "b"],
        ["which"],
        ["backends", "add", "x"],
        ["list", "--js"],  # argparse's abbreviations stay argparse's
        ["list", "--"],
        ["list", "--home"],
        ["--home", "--json", "list"],
        ["--home=", "list"],
        ["--home", "a", "--home", "b", "list"],
    ):
        assert parse(words) is None, words


def test_the_static_command_table_is_what_the_modules_build() -> None:
    """``--help`` and unknown commands read the table; a run builds one command's parser."""
    from backendmgr.cli.commands import COMMANDS
    from backendmgr.cli.parser import build_parser

    full = build_parser()
    sub = next(a for a in full._actions if isinstance(a, argparse._SubParsersAction))
    helps = {choice.dest: choice.help for choice in sub._choices_actions}
    assert list(sub.choices) == list(COMMANDS)
    assert {name: helps.get(name) for name in sub.choices} == {
        name: help_text for name, (_, help_text) in COMMANDS.items()
    }
    lazy = build_parser(["--help"])
    assert lazy.format_help() == full.format_help()
    one = build_parser(["--json", "install", "llama-server"])
    lazy_sub = next(a for a in one._actions if isinstance(a, argparse._SubParsersAction))
    assert lazy_sub.choices["install"].format_help() == sub.choices["install"].format_help()
    assert lazy_sub.choices["list"].format_help() != sub.choices["list"].format_help()  # a stand-in


def test_completing_ids_reads_the_memo_while_nothing_changed(home: Path, tmp_path: Path) -> None:
    trace = tmp_path / "trace"
    env = {"BACKENDMGR_FASTREAD_TRACE": str(trace)}
    for words, expected in (
        (("activate", ""), ["llama-server@b100-vulkan", "llama-server@b200-vulkan"]),
        (("pin", ""), ["llama-3b", "qwen3-8b-q4_k_m"]),
        (("default", "my"), ["my-llama"]),
    ):
        trace.unlink(missing_ok=True)
        first = run_backendmgr("__complete", "--", *words, env=env)
        second = run_backendmgr("__complete", "--", *words, env=env)
        full = run_backendmgr("__complete", "--", *words, env={"BACKENDMGR_NO_FASTREAD": "1"})
        assert first.stdout.split() == second.stdout.split() == full.stdout.split()
        assert sorted(full.stdout.split()) == expected
        said = trace.read_text().split()  # a quick look first, then the full walk stores
        assert said[-2:] == ["stored", "hit"] and set(said[:-2]) == {"miss"}, words
    shutil.rmtree(home / "home" / "builds" / "llama-server" / "b100-vulkan")
    again = run_backendmgr("__complete", "--", "activate", "", env=env)
    assert again.stdout.split() == ["llama-server@b200-vulkan"]


def test_the_first_ids_table_is_what_completion_finds_in_the_parser() -> None:
    from backendmgr.cli.commands.completion import analyse
    from backendmgr.cli.parser import build_parser
    from backendmgr.cli.table import FIRST_IDS

    for command, kinds in FIRST_IDS.items():
        found, _ = analyse(build_parser([command, ""]), [command, ""])
        assert found == [f"kind:{k}" for k in kinds], command


def test_tab_on_a_first_id_from_the_memo_is_the_full_walks_answer(
    home: Path, tmp_path: Path
) -> None:
    trace = tmp_path / "trace"
    for words in (("install", ""), ("activate", "llama"), ("pin", ""), ("which", ""), ("cmd", "q")):
        full = run_backendmgr("__complete", "--", *words, env={"BACKENDMGR_NO_FASTREAD": "1"})
        first = run_backendmgr("__complete", "--", *words)  # stores what the walk found
        trace.unlink(missing_ok=True)
        quick = run_backendmgr("__complete", "--", *words, env={TRACE: str(trace)})
        assert full.stdout == first.stdout == quick.stdout, words
        assert trace.read_text().split() == ["hit"], words  # no parser was built
    assert "llama-server" in run_backendmgr("__complete", "--", "install", "").stdout.split()
