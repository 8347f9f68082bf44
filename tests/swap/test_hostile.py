"""llama-swap's lifecycle attacked (issue 29): a port that drips, a port that answers terminal
escapes, ``up`` killed by SIGHUP or SIGKILL, a second ``up``, planted links and absurd pids in
the state, and listen addresses llama-swap cannot bind. Through the real CLI with the real
llama-swap and stand-in servers; every wait is bounded."""

from __future__ import annotations

import json
import os
import signal
import unicodedata
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from backendmgr._fs import LinkRefused
from backendmgr.swap.status import READ_DEADLINE_S, SwapState, write_state
from tests.support.cli import CliResult, error_line, run_backendmgr
from tests.support.swap import (
    SWAP_BIN,
    alive,
    answering,
    answering_port,
    chat,
    dripping_port,
    fake_pids,
    free_port,
    model_setup,
    needs_swap,
    ok,
    plant_state,
    real_swap,
    start_up,
    state,
    stop_everything,
    timed,
    wait_for,
    web_status,
)

SLACK_S = 6.0  # a child interpreter's start and the command's own work, on a busy machine


@pytest.fixture
def generated(installed: dict[str, Path], cli: Callable[..., CliResult]) -> Path:
    return Path(json.loads(ok(cli("--json", "generate")).out)["output"])


def record_for(home: Path, swap_pid: int, url: str, config: Path) -> Path:
    """The record ``up`` would write for the real llama-swap ``swap_pid`` serving ``config``,
    but with ``url`` (the port under test)."""
    return plant_state(home, pid=swap_pid, url=url, config=str(config), exe=str(SWAP_BIN))


@needs_swap
def test_a_dripping_port_holds_neither_status_nor_set_nor_the_api(
    tmp_path: Path, generated: Path
) -> None:
    from concurrent.futures import ThreadPoolExecutor

    with real_swap(generated) as swap, dripping_port() as url:
        record_for(tmp_path / "home", swap.pid, url, generated)
        # all three at once (each is bounded on its own; the suite stays fast)
        with ThreadPoolExecutor(2) as pool:
            looked = pool.submit(timed, lambda: run_backendmgr("--json", "status", timeout=60))
            # a mutation notes llama-swap's log before it writes: that read is bounded too
            changed = pool.submit(
                timed, lambda: run_backendmgr("set", "alpha-q4_k_m", "ctx=2048", timeout=60)
            )
            page, page_s = timed(web_status)
            (done, spent), (mutated, mutated_s) = looked.result(), changed.result()
    assert done.returncode == 0, done.stderr
    assert spent < READ_DEADLINE_S + SLACK_S, spent
    seen = json.loads(done.stdout)
    assert seen["running"] is True and seen["pid"] == swap.pid
    assert seen["problems"] == [
        f"llama-swap at {url} does not answer (no full answer from {url} within 5 s)"
    ]
    assert mutated.returncode == 0, mutated.stderr
    assert mutated_s < READ_DEADLINE_S + SLACK_S, mutated_s
    assert page["status"]["running"] is True and page["status"]["problems"] == seen["problems"]
    assert page_s < READ_DEADLINE_S + SLACK_S, page_s


def unprintable(text: str) -> list[str]:
    """Characters that could drive a terminal: controls (C0 but the newline, C1) and format
    characters (bidi overrides, zero-width)."""
    return [
        ch for ch in text if ch != "\n" and unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp")
    ]


def strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in strings(k) + strings(v)]
    if isinstance(value, list):
        return [s for item in value for s in strings(item)]
    return []


HOSTILE = "\x1b[2J\x1b]0;owned\x07v9\r\nerror: all models deleted\u202e\x9b31m\u2028"


@needs_swap
def test_what_the_port_answers_never_reaches_the_terminal_raw(
    tmp_path: Path, generated: Path, cli: Callable[..., CliResult]
) -> None:
    routes = {
        "/api/version": json.dumps({"version": HOSTILE}).encode(),
        "/running": json.dumps(
            {"running": [{"model": f"m{HOSTILE}", "state": "ready\r\x1b[1A", "cmd": HOSTILE}]}
        ).encode(),
        "/v1/models": json.dumps({"data": [{"id": f"gone{HOSTILE}"}]}).encode(),
    }
    with real_swap(generated) as swap, answering_port(routes) as url:
        record_for(tmp_path / "home", swap.pid, url, generated)
        text = ok(cli("status"))
        as_json = ok(cli("--json", "status"))
        page = web_status()["status"]
    for said in (text.out, text.err, as_json.err):
        assert unprintable(said) == [], said
        assert not [line for line in said.splitlines() if line.startswith("error:")], said
    assert "v9 error: all models deleted\\u202e\\x9b31m" in text.out  # shown, as escapes
    document = json.loads(as_json.out)
    assert document == page
    assert [s for s in strings(document) if unprintable(s) or "\n" in s] == []
    assert document["version"].startswith("\\x1b[2J\\x1b]0;owned\\x07v9 error: all")


@needs_swap
@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGKILL], ids=["hup", "kill"])
def test_up_killed_leaves_no_process(
    installed: dict[str, Path], cli: Callable[..., CliResult], sig: signal.Signals
) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = start_up("--listen", f"127.0.0.1:{port}")
    try:
        wait_for(lambda: answering(url) or proc.poll() is not None, what="llama-swap")
        swap_pid = wait_for(lambda: (state(installed["home"]) or {}).get("pid"), what="state")
        chat(url, "beta-q4_k_m")  # a model server with a child of its own
        everything = [swap_pid, *fake_pids(installed["fake"])]
        assert len(everything) == 3 and all(alive(p) for p in everything)
        proc.send_signal(sig)  # a closed terminal / a kill -9
        proc.communicate(timeout=30)
        try:
            wait_for(lambda: not any(alive(p) for p in everything), timeout=5, what="all gone")
        except AssertionError:
            left = {
                p: Path(f"/proc/{p}/cmdline").read_bytes()[:200] for p in everything if alive(p)
            }
            raise AssertionError(f"left after {sig.name}: {left} of {everything}") from None
        if sig == signal.SIGHUP:
            assert proc.returncode == 0 and state(installed["home"]) is None
        else:  # nothing could remove the record: the next status does
            assert state(installed["home"]) is not None
            seen = json.loads(ok(cli("--json", "status")).out)
            assert seen["running"] is False
            assert seen["problems"] == [
                f"removed a stale record: {installed['home'] / 'swap' / 'up.json'} names pid "
                f"{swap_pid}, which is not running"
            ]
            assert state(installed["home"]) is None
    finally:
        stop_everything(proc, installed["fake"])


@needs_swap
def test_a_second_up_is_refused_and_replace_takes_over(
    installed: dict[str, Path], cli: Callable[..., CliResult]
) -> None:
    first_port, second_port = free_port(), free_port()
    first_url, second_url = f"http://127.0.0.1:{first_port}", f"http://127.0.0.1:{second_port}"
    first = start_up("--listen", f"127.0.0.1:{first_port}")
    second = None
    try:
        wait_for(lambda: answering(first_url) or first.poll() is not None, what="llama-swap")
        swap_pid = wait_for(lambda: (state(installed["home"]) or {}).get("pid"), what="state")
        line = error_line(cli("up", "--listen", f"127.0.0.1:{second_port}"), 1)
        assert f"(pid {swap_pid}, on {first_url}, started by backendmgr up pid {first.pid})" in line
        assert "--replace" in line
        assert not answering(second_url)

        second = start_up("--listen", f"127.0.0.1:{second_port}", "--replace")
        wait_for(lambda: answering(second_url) or second.poll() is not None, what="the new one")
        _, err = first.communicate(timeout=30)
        assert first.returncode == 0, err
        assert not alive(swap_pid) and not answering(first_url)
        wait_for(
            lambda: (state(installed["home"]) or {}).get("listen") == f"127.0.0.1:{second_port}",
            what="the new record",
        )
        second.send_signal(signal.SIGINT)
        _, err = second.communicate(timeout=30)
        assert second.returncode == 0
        assert f"stopped the llama-swap that served on {first_url} (pid {swap_pid})" in err
    finally:
        stop_everything(first, installed["fake"])
        if second is not None:
            stop_everything(second, installed["fake"])


@needs_swap
def test_two_ups_started_at_once_serve_once(
    installed: dict[str, Path], cli: Callable[..., CliResult]
) -> None:
    """Neither has a record yet when the other starts: the lock an up holds decides."""
    ports = [free_port(), free_port()]
    procs = [start_up("--listen", f"127.0.0.1:{port}") for port in ports]
    try:
        wait_for(lambda: any(p.poll() is not None for p in procs), what="one up to give way")
        (loser,) = [p for p in procs if p.poll() is not None]
        (winner,) = [p for p in procs if p is not loser]
        _, err = loser.communicate(timeout=30)
        assert loser.returncode == 1
        (line,) = [line for line in err.splitlines() if line.startswith("error:")]
        assert "another backendmgr up is starting llama-swap" in line or "already serves" in line
        url = f"http://127.0.0.1:{ports[procs.index(winner)]}"
        wait_for(lambda: answering(url) or winner.poll() is not None, what="the winner")
        winner.send_signal(signal.SIGINT)
        winner.communicate(timeout=30)
        assert winner.returncode == 0
    finally:
        for proc in procs:
            stop_everything(proc, installed["fake"])


def a_state() -> SwapState:
    return SwapState(1, 1, "127.0.0.1:9", "http://127.0.0.1:9", "/x", "/y")


@pytest.mark.parametrize("where", ["file", "folder", "lock"])
def test_a_planted_link_is_refused_and_its_target_untouched(
    tmp_path: Path, cli: Callable[..., CliResult], where: str
) -> None:
    home = tmp_path / "home"
    outside = tmp_path / "outside"
    outside.mkdir()
    victim = outside / "victim.txt"
    victim.write_text("precious\n")
    (home / "swap").parent.mkdir(parents=True, exist_ok=True)
    if where in ("file", "lock"):
        (home / "swap").mkdir()
        link = home / "swap" / ("up.json" if where == "file" else "up.lock")
        link.symlink_to(victim)
    else:
        link = home / "swap"
        link.symlink_to(outside)
    line = error_line(cli("up", "--listen", f"127.0.0.1:{free_port()}"), 1)
    assert f"{link} is a symbolic link" in line
    if where != "lock":
        seen = json.loads(ok(cli("--json", "status")).out)
        assert seen["running"] is False and f"{link} is a symbolic link" in seen["problems"][0]
        with pytest.raises(LinkRefused, match="symbolic link"):
            write_state(home, a_state())  # what up writes once llama-swap serves
    assert victim.read_text() == "precious\n"
    assert sorted(p.name for p in outside.iterdir()) == ["victim.txt"]
    assert link.is_symlink()


@needs_swap
def test_a_linked_unit_file_is_refused(
    tmp_path: Path, installed: dict[str, Path], cli: Callable[..., CliResult]
) -> None:
    unit = tmp_path / "xdg" / "systemd" / "user" / "backendmgr-llama-swap.service"
    unit.parent.mkdir(parents=True)
    victim = tmp_path / "victim.service"
    victim.write_text("[Unit]\n")
    unit.symlink_to(victim)
    line = error_line(cli("service", "install", "--listen", "127.0.0.1:8123"), 1)
    assert f"{unit} is a symbolic link" in line
    assert victim.read_text() == "[Unit]\n" and unit.is_symlink()


@pytest.mark.parametrize("pid", [2**63, -5, 0, 2**31, "12", 1.5, True, None, [1]])
def test_an_absurd_pid_is_malformed_state_in_one_line(
    tmp_path: Path, config_path: Path, cli: Callable[..., CliResult], pid: object
) -> None:
    model_setup(tmp_path, config_path)
    record = plant_state(tmp_path / "home", pid=pid)
    changed = cli("set", "alpha-q4_k_m", "ctx=2048")  # a mutation reads the record first
    assert changed.code == 0 and "internal error" not in changed.err, changed
    done = ok(cli("status"))
    warnings = [line for line in done.err.splitlines() if line]
    assert len(warnings) == 1, done.err
    assert warnings[0].startswith(f"warning: removed a stale record: {record} is malformed")
    assert "internal error" not in done.err and not record.exists()


@needs_swap
def test_pid_1_or_any_live_pid_that_is_not_llama_swap_is_not_running(
    tmp_path: Path, generated: Path, cli: Callable[..., CliResult]
) -> None:
    for pid in (1, os.getpid()):
        record = plant_state(tmp_path / "home", pid=pid, exe=str(SWAP_BIN), config=str(generated))
        seen = json.loads(ok(cli("--json", "status")).out)
        assert seen["running"] is False, seen
        assert seen["problems"][0].startswith(f"removed a stale record: {record} names pid {pid}")
        assert not record.exists()
    with real_swap(generated) as swap:  # the real one, with another config: not up's either
        record = plant_state(tmp_path / "home", pid=swap.pid, exe=str(SWAP_BIN), config="/x")
        seen = json.loads(ok(cli("--json", "status")).out)
        assert seen["running"] is False and "is another program now" in seen["problems"][0]


@pytest.mark.parametrize(
    "listen", ["127.0.0.1:\u0661\u0668\u0669\u0664\u0660", '[::1%x y"z]:18931', "::1:18931"]
)
def test_service_install_refuses_an_address_llama_swap_cannot_bind(
    tmp_path: Path, config_path: Path, cli: Callable[..., CliResult], listen: str
) -> None:
    model_setup(tmp_path, config_path)
    line = error_line(cli("service", "install", "--listen", listen), 2)
    assert "is not a listen address" in line
    assert not (tmp_path / "xdg").exists()


def test_the_last_error_line_is_kept_not_the_last_log_line() -> None:
    from backendmgr.swap.process import _Lines

    heard: list[str] = []
    lines = _Lines(heard.append)
    lines.feed(
        b"2026/01/02 03:04:05 [INFO] llama-swap listening on http://127.0.0.1:1\n"
        b"[ERROR] upstream process for alpha exited: signal: killed\n"
        b'[INFO] Request 127.0.0.1 "GET /health HTTP/1.1" 200 error=none\n'
        b"2026/01/02 03:04:06 [INFO] Request for an error page\n"
    )
    lines.close()
    assert len(heard) == 4
    assert lines.last_error == "[ERROR] upstream process for alpha exited: signal: killed"


@needs_swap
@pytest.mark.parametrize("system", ["linux", "darwin"])
def test_identify_by_executable_and_command_line(
    tmp_path: Path, generated: Path, monkeypatch: pytest.MonkeyPatch, system: str
) -> None:
    """Linux reads /proc; other POSIX systems ask ps (here: ps on Linux, as macOS would)."""
    import dataclasses
    import shutil
    import sys

    from backendmgr.swap.status import identify

    if system != "linux" and not shutil.which("ps"):
        pytest.skip("no ps")
    monkeypatch.setattr(sys, "platform", system)
    with real_swap(generated) as swap:
        ours = SwapState(swap.pid, 1, "127.0.0.1:9", "http://x", str(generated), str(SWAP_BIN))
        assert identify(ours) is None
        other = str(tmp_path / "other.yaml")
        assert "another program" in (identify(dataclasses.replace(ours, config=other)) or "")
        assert "another program" in (identify(dataclasses.replace(ours, exe="/bin/sh")) or "")
    assert identify(SwapState(1, 1, "a", "b", str(generated), str(SWAP_BIN))) is not None
    assert identify(SwapState(swap.pid, 1, "a", "b", str(generated), str(SWAP_BIN))) == (
        "is not running"
    )


@needs_swap
@pytest.mark.parametrize("url", ["http://127.0.0.1:99999", "nope://x", "http://[bad", "\x1b[2J"])
def test_a_record_with_a_broken_url_is_one_warning(
    tmp_path: Path, generated: Path, cli: Callable[..., CliResult], url: str
) -> None:
    with real_swap(generated) as swap:
        record_for(tmp_path / "home", swap.pid, url, generated)
        done = ok(cli("status"))
    assert unprintable(done.out + done.err) == []
    (warning,) = done.err.splitlines()
    assert warning.startswith("warning: llama-swap at ") and "does not answer" in warning
