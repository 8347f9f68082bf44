"""``backendmgr up`` with the real llama-swap (issue 21, items 2 and 5): it serves exactly the
emitted models, a chat request starts the model's emitted command (the serving stand-in) and
is answered, ``pin``/``set`` while it runs reach the next start (and the command says when
llama-swap reloaded), and Ctrl-C or SIGTERM leaves no process behind."""

from __future__ import annotations

import json
import signal
from collections.abc import Callable
from pathlib import Path

from backendmgr.swap.status import file_models
from tests.support.cli import CliResult
from tests.support.swap import (
    alive,
    answering,
    chat,
    fake_pids,
    free_port,
    get,
    model_setup,
    needs_swap,
    ok,
    start_up,
    state,
    stop_everything,
    wait_for,
)

pytestmark = needs_swap


def running(url: str) -> dict[str, str]:
    return {r["model"]: r["cmd"] for r in get(f"{url}/running")["running"]}


def test_up_serves_the_emitted_models_and_takes_changes(
    installed: dict[str, Path], cli: Callable[..., CliResult]
) -> None:
    output = Path(json.loads(ok(cli("--json", "generate")).out)["output"])
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = start_up("--listen", f"127.0.0.1:{port}")
    try:
        wait_for(lambda: answering(url) or proc.poll() is not None, what="llama-swap")
        assert proc.poll() is None, proc.communicate()
        swap_pid = wait_for(lambda: (state(installed["home"]) or {}).get("pid"), what="state")

        emitted = set(file_models(output.read_text()))
        assert {m["id"] for m in get(f"{url}/v1/models")["data"]} == emitted
        assert emitted == {"alpha-q4_k_m", "beta-q4_k_m"}

        assert chat(url, "alpha-q4_k_m")["choices"][0]["message"]["content"] == "OK"
        argv = json.loads(ok(cli("--json", "cmd", "alpha-q4_k_m")).out)["argv"]
        started = running(url)["alpha-q4_k_m"].split()
        assert started[0] == str(installed["one"]) and started[1:3] == argv[1:3]

        pinned = ok(cli("pin", "alpha-q4_k_m", "two"))
        assert "llama-swap reloaded" in pinned.err, pinned.err
        chat(url, "alpha-q4_k_m")
        assert running(url)["alpha-q4_k_m"].split()[0] == str(installed["two"])

        assert f"  rewrote {output} (alpha-q4_k_m)" in pinned.out.splitlines()  # issue 33
        changed = json.loads(ok(cli("--json", "set", "alpha-q4_k_m", "ctx=2048")).out)
        assert changed["changes"]["generated"] == {
            "output": str(output),
            "models": ["alpha-q4_k_m"],
        }
        assert any("llama-swap reloaded" in n for n in changed["changes"]["llama_swap"]["notes"])
        chat(url, "alpha-q4_k_m")
        tokens = running(url)["alpha-q4_k_m"].split()
        assert tokens[tokens.index("-c") + 1] == "2048"

        chat(url, "beta-q4_k_m")  # a server that starts a child of its own
        servers = fake_pids(installed["fake"])
        assert len(servers) >= 4 and any(alive(p) for p in servers)

        proc.send_signal(signal.SIGINT)  # Ctrl-C
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        assert "stopped llama-swap" in err
        assert "llama-swap listening on" in out  # its log, forwarded
        assert not alive(swap_pid)
        assert [p for p in servers if alive(p)] == []
        assert state(installed["home"]) is None
        assert not answering(url)
    finally:
        stop_everything(proc, installed["fake"])


def test_sigterm_stops_it_and_its_servers(
    installed: dict[str, Path], cli: Callable[..., CliResult]
) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = start_up("--listen", f"localhost:{port}")
    try:
        wait_for(lambda: answering(url) or proc.poll() is not None, what="llama-swap")
        chat(url, "beta-q4_k_m")
        servers = fake_pids(installed["fake"])
        assert len(servers) == 2 and all(alive(p) for p in servers)
        proc.send_signal(signal.SIGTERM)
        proc.send_signal(signal.SIGINT)  # an impatient second signal does not cut the stop short
        proc.communicate(timeout=60)
        assert proc.returncode == 0
        assert [p for p in servers if alive(p)] == []
    finally:
        stop_everything(proc, installed["fake"])


def test_a_config_llama_swap_refuses_fails_up_with_its_message(
    installed: dict[str, Path], config_path: Path
) -> None:
    with config_path.open("a") as fh:  # valid for the schema, refused by llama-swap
        fh.write("  groups: {g: {members: [no-such-model]}}\n")  # under llama_swap:
    proc = start_up("--listen", f"127.0.0.1:{free_port()}")
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 1
    last = err.strip().splitlines()[-1]
    assert last.startswith("error: llama-swap refused to start"), err
    assert 'no model config for \\"no-such-model\\"' in last or "no-such-model" in last
    assert state(installed["home"]) is None


def test_up_refuses_without_llama_swap_and_beyond_loopback(
    tmp_path: Path, config_path: Path, cli: Callable[..., CliResult]
) -> None:
    model_setup(tmp_path, config_path)
    missing = cli("up")
    assert missing.code == 1 and 'run "backendmgr install llama-swap"' in missing.err
    public = cli("up", "--listen", "0.0.0.0:8080")
    assert public.code == 1
    assert "no authentication unless its config sets apiKeys" in public.err
    assert "--public" in public.err
    bad = cli("up", "--listen", "nowhere")
    assert bad.code == 2 and "is not a listen address" in bad.err  # typed wrong (SPEC §13)


def test_a_new_llama_swap_build_while_up_runs_is_named(
    installed: dict[str, Path],
    mirror: object,
    mirror_root: Path,
    swap_release: dict[str, bytes],
    cli: Callable[..., CliResult],
) -> None:
    """A new build reaches a service by a restart; a foreground ``up`` is the user's to
    restart, and the install says so."""
    from tests.support.swap import publish_swap

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = start_up("--listen", f"127.0.0.1:{port}")
    try:
        wait_for(lambda: answering(url) or proc.poll() is not None, what="llama-swap")
        wait_for(lambda: state(installed["home"]), what="up's record")
        publish_swap(mirror_root, swap_release, tag="v251")
        done = ok(cli("install", "llama-swap", "v251", "--activate"))
        assert "installed llama-swap@v251-any and activated it" in done.out
        assert 'a running "backendmgr up" still serves the old llama-swap build' in done.err
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=60)
        assert proc.returncode == 0
    finally:
        stop_everything(proc, installed["fake"])


def test_a_llama_swap_that_dies_is_started_again_and_its_orphans_stopped(
    installed: dict[str, Path], cli: Callable[..., CliResult]
) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = start_up("--listen", f"127.0.0.1:{port}")
    try:
        wait_for(lambda: answering(url) or proc.poll() is not None, what="llama-swap")
        first = wait_for(lambda: (state(installed["home"]) or {}).get("pid"), what="state")
        chat(url, "beta-q4_k_m")  # a server and its child, in a process group of their own
        orphans = fake_pids(installed["fake"])
        assert len(orphans) == 2

        import os

        os.kill(first, signal.SIGKILL)  # llama-swap dies; its servers would live on
        again = wait_for(
            lambda: (state(installed["home"]) or {}).get("pid", first) != first and answering(url),
            what="llama-swap started again",
        )
        assert again and proc.poll() is None
        wait_for(lambda: not any(alive(p) for p in orphans), what="the orphans to be stopped")
        assert chat(url, "alpha-q4_k_m")["choices"][0]["message"]["content"] == "OK"
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
        assert proc.returncode == 0
        (restart,) = [line for line in out.splitlines() if "starting it again" in line]
        assert restart.startswith("backendmgr: llama-swap stopped (signal 9); starting it again")
        assert "restart 1 of 5" in restart
        assert "[INFO]" not in restart and "Request" not in restart  # not its last log line
        assert [p for p in fake_pids(installed["fake"]) if alive(p)] == []
    finally:
        stop_everything(proc, installed["fake"])
