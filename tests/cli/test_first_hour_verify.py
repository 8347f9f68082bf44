"""The first hour of a new user (issue 20, points 7, 8 and 11): what ``verify`` did not check,
what a slow probe waits for, and a value that does not parse for its key; each through the
real CLI in this process."""

from __future__ import annotations

import contextlib
import io
import json
import os
import pty
import re
import select
import sys
import termios
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.cli import CliResult
from tests.support.ggufs import write_gguf
from tests.support.standins import SERVER_STANDIN

Cli = Callable[..., CliResult]
MIB = 1 << 20


def _exe(path: Path, body: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!{sys.executable}\n{body}")
    path.chmod(0o755)
    return path


@pytest.fixture
def three_models(tmp_path: Path, config_path: Path) -> Path:
    """chat, embed and rank, served by the stand-in server; chat's crashes at start."""
    server = _exe(tmp_path / "bin" / "llama-server", SERVER_STANDIN)
    root = tmp_path / "models"
    write_gguf(root / "chat.gguf", "qwen3", layers=4, ctx=8192, size_bytes=MIB)
    write_gguf(root / "embed.gguf", "bert", layers=4, ctx=512, pooling=1, size_bytes=MIB)
    write_gguf(root / "rank.gguf", "bert", layers=4, ctx=512, pooling=4, size_bytes=MIB)
    config_path.parent.mkdir(parents=True, exist_ok=True)
    config_path.write_text(
        f"models_dirs: [{json.dumps(str(root))}]\n"
        f"backends:\n  - {{id: fake-llama, kind: llama, path: {json.dumps(str(server))}}}\n"
        "models:\n  chat: {extra_args: '--fake-mode crash'}\n"
    )
    return config_path


# --- 7: verify names what it did not check --------------------------------------------------


def test_verify_stopping_at_a_failure_names_the_models_it_did_not_check(
    cli: Cli, three_models: Path
) -> None:
    result = cli("verify", "--timeout", "5")
    assert result.code == 1, result
    assert "Traceback" not in result.err, result.err
    assert result.out.startswith("chat: failed: exited with status 3")
    assert "embed" not in result.out and "rank" not in result.out  # neither was started
    last = result.err.strip().splitlines()[-1]
    assert last.startswith("error: 1 of 3 models failed verification: chat; ")
    assert "2 not checked after the first failure: embed, rank" in last
    assert "--keep-going" in last and "backendmgr verify embed rank" in last

    doc = json.loads(cli("--json", "verify", "--timeout", "5").out)
    assert [r["id"] for r in doc["results"]] == ["chat"] and doc["failed"] == 1
    assert doc["unchecked"] == ["embed", "rank"]

    # the way out it named works: both are checked, and nothing is left unchecked
    named = cli("--json", "verify", "embed", "rank", "--timeout", "20")
    assert named.code == 0, named
    assert json.loads(named.out)["unchecked"] == []
    every = cli("verify", "--keep-going", "--timeout", "20")
    assert every.code == 1
    assert every.err.strip().splitlines()[-1] == ("error: 1 of 3 models failed verification: chat")
    assert [line.split(":")[0] for line in every.out.splitlines()] == ["chat", "embed", "rank"]


# --- 8: a slow step says what it waits for ----------------------------------------------------


def on_terminal(*args: str) -> tuple[CliResult, float]:
    """``backendmgr ARGS`` in this process with stderr on a real terminal (a pty), and how long
    it took; stdout stays a pipe-like buffer, as in ``backendmgr … | jq``."""
    from backendmgr.cli import main as cli_main

    leader, follower = pty.openpty()
    attrs = termios.tcgetattr(follower)
    attrs[1] &= ~termios.ONLCR  # "\n" stays "\n"
    termios.tcsetattr(follower, termios.TCSANOW, attrs)
    out = io.StringIO()
    start = time.monotonic()
    with (
        os.fdopen(follower, "w", buffering=1) as terminal,
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(terminal),
    ):
        code = cli_main.main(list(args))
    took = time.monotonic() - start
    chunks = []
    while select.select([leader], [], [], 0)[0]:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: the terminal's other end is closed and drained
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    return CliResult(code, out.getvalue(), b"".join(chunks).decode()), took


def test_a_probe_of_a_program_that_hangs_says_what_it_waits_for_and_keeps_its_limit(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from backendmgr.install import probe

    monkeypatch.setattr(probe, "TIMEOUT_S", 0.3)  # the README's 10 s, shortened for the test
    hang = _exe(tmp_path / "bin" / "hang", "import time\ntime.sleep(600)\n")
    result, took = on_terminal("backends", "add", "slow", "--kind", "llama", "--path", str(hang))
    assert result.code == 0, result
    assert result.err.splitlines()[0] == f"probing {hang} --help (at most 0.3 s)…"
    assert "probing" not in result.out  # stdout stays the result
    assert took < 0.3 + 4  # one limit for the whole probe, not one per run (20.7 s for 10 s)
    caps = {r["id"]: r["capabilities"] for r in json.loads(cli("--json", "backends").out)}
    assert caps["slow"]["error"] == (
        "--help: did not finish within 0.3 s; --version: did not finish within 0.3 s"
        # both run at once (issue 34): neither waits for the other, one limit for the two
    )

    # with --json or -q, or in a pipe, nothing but the result; a cached probe waits for nothing
    hang.write_text(hang.read_text() + "# changed: probed again\n")
    for flags in (["--json"], ["-q"]):
        shown, _ = on_terminal("backends", "--json", *flags)
        assert shown.code == 0 and shown.err == "", shown
        hang.write_text(hang.read_text() + "#\n")
    piped = cli("--json", "backends")
    assert piped.code == 0 and "probing" not in piped.err, piped
    assert "probing" not in on_terminal("models")[0].err  # cached: nothing to wait for


def test_the_probes_limit_is_the_one_the_readme_states() -> None:
    from backendmgr.install import probe

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    text = " ".join(readme.split())
    stated = re.findall(r"`--list-devices`\), (\d+) s in all", text)
    stated += re.findall(r"the capability probe \(`--help`, (\d+) s\)", text)
    assert len(stated) == 2 and {float(s) for s in stated} == {probe.TIMEOUT_S}, stated


def test_each_verify_start_says_how_long_it_may_wait(three_models: Path) -> None:
    shown, _ = on_terminal("verify", "embed", "--timeout", "20")
    assert shown.code == 0, shown
    first_use, start = shown.err.splitlines()  # the stand-in server is probed on first use
    assert first_use.startswith("probing ") and first_use.endswith("--help (at most 10 s)…")
    assert start == "starting embed until it answers (at most 20 s)…"
    assert shown.out.startswith("embed: ok in ")


# --- 11: a value its key cannot take is a usage error -----------------------------------------


@pytest.mark.parametrize(
    ("pair", "key"),
    [("ctx=abc", "ctx"), ("ctx=-5", "ctx"), ("llama_swap=: [", "llama_swap"), ("ctx", "ctx")],
)
def test_a_value_its_key_cannot_take_exits_2_naming_the_key(
    cli: Cli, three_models: Path, pair: str, key: str
) -> None:
    before = three_models.read_bytes()
    result = cli("set", "chat", pair)
    assert result.code == 2, result
    assert "Traceback" not in result.err, result.err
    lines = result.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and key in lines[0], lines
    as_json = cli("--json", "set", "chat", pair)
    assert as_json.code == 2 and json.loads(as_json.out)["exit"] == 2
    assert three_models.read_bytes() == before  # nothing written
    assert cli("set", "chat", "ctx=4096", "--no-generate").code == 0  # a good value still is
