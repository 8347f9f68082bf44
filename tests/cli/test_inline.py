"""Issue 30: an edit while no llama-swap runs and no service is installed is driven with no
event loop (:mod:`backendmgr._inline`): its output, exit status and files are exactly those
of the same command on the loop; a service or a llama-swap's record sends it to the loop
(the follow-up needs HTTP); a path that would wait on a loop is stopped, never run halfway."""

from __future__ import annotations

import json
import shutil
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from backendmgr import _inline
from backendmgr.cli.commands import swap as swap_cli
from backendmgr.mirror import MirrorServer
from tests.support import publish_llama
from tests.support.cli import Cli, error_line, finish, ok, spawn_backendmgr
from tests.support.ggufs import write_gguf
from tests.support.startup import loaded_after

MODEL = "qwen3-8b-q4_k_m"

# every command the CLI runs inline, its refusals and dry runs too, text and --json
STEPS: list[tuple[str, ...]] = [
    ("generate",),
    ("generate",),
    ("--json", "generate", "--force"),
    ("generate", "--check"),
    ("set", MODEL, "ctx=4096", "env=A=1"),
    ("--json", "set", MODEL, "ctx=8192"),
    ("set", "--dry-run", MODEL, "ctx=2048"),
    ("set", MODEL, "ctx=-1"),
    ("set", "no-such-model", "ctx=4096"),
    ("unset", MODEL, "env"),
    ("pin", MODEL, "llama-server@b100-vulkan"),
    ("--json", "pin", MODEL, "llama-src"),
    ("pin", MODEL, "no-such-row"),
    ("unpin", MODEL),
    ("--json", "unpin", MODEL),
    ("default", "llama-src"),
    ("activate", "llama-server@b100-vulkan"),
    ("activate", "llama-server@b999-vulkan"),
    ("--json", "activate", "--dry-run", "llama-server@b200-vulkan"),
    ("activate", "llama-server@b200-vulkan"),
    ("backends", "add", "mine", "--kind", "llama", "--path", "/bin/true"),
    ("backends", "add", "mine", "--kind", "llama", "--path", "/bin/true"),
    ("--json", "backends", "remove", "mine"),
    ("models", "add-dir", "{tmp}/more"),
    ("models", "remove-dir", "--dry-run", "{tmp}/more"),
    ("--json", "models", "remove-dir", "{tmp}/more"),
    ("-q", "generate", "--force"),
]


def _files(*roots: Path) -> dict[str, object]:
    """Every file under ``roots`` and its bytes (the download cache aside: installs made it);
    a kept parse without its stamp (the file's inode and times, which a copy changes)."""
    found: dict[str, object] = {}
    for root in roots:
        for path in sorted(root.rglob("*")):
            if path.is_file() and "downloads" not in path.parts:
                found[str(path)] = path.read_bytes()
                if path.name.endswith(".parsed.json"):
                    found[str(path)] = {**json.loads(path.read_bytes()), "stamp": None}
    return found


def _replay(cli: Cli, tmp: Path) -> list[tuple[tuple[str, ...], int, str, str]]:
    said = []
    for step in STEPS:
        words = tuple(w.replace("{tmp}", str(tmp)) for w in step)
        result = cli(*words)
        assert "Traceback" not in result.err, (words, result.err)
        said.append((words, result.code, result.out, result.err))
    return said


def test_every_inline_command_says_and_writes_what_it_does_on_the_loop(
    cli: Cli,
    tmp_path: Path,
    config_path: Path,
    mirror: MirrorServer,
    mirror_root: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    home = tmp_path / "home"
    models = tmp_path / "models"
    write_gguf(models / f"{MODEL}.gguf", "qwen3", layers=36, ctx=40960, size_bytes=1 << 30)
    (tmp_path / "more").mkdir()
    config_path.parent.mkdir(parents=True)
    config_path.write_text(
        f"models_dirs: [{json.dumps(str(models))}]\n"
        "backends:\n  - {id: llama-src, kind: llama, path: /bin/true}\n"
    )
    for tag in ("b100", "b200"):
        publish_llama(mirror_root, tag, ["vulkan"])
        ok(cli("install", "llama-server", tag))
    roots = (config_path.parent, home)
    saved = tmp_path / "saved"
    for root in roots:
        shutil.copytree(root, saved / root.name)

    inline_runs: list[str] = []
    real_run_inline = _inline.run_inline

    def counted(awaitable: Any) -> Any:
        inline_runs.append(type(awaitable).__name__)
        return real_run_inline(awaitable)

    monkeypatch.setattr(_inline, "run_inline", counted)
    inline = _replay(cli, tmp_path)
    assert len(inline_runs) == len(STEPS)  # every one ran with no loop
    inline_files = _files(*roots)

    for root in roots:  # the same home again, for the same commands on the loop
        shutil.rmtree(root)
        shutil.copytree(saved / root.name, root)
    monkeypatch.setattr(swap_cli, "runs_inline", lambda mgr, args: False)
    on_loop = _replay(cli, tmp_path)
    assert len(inline_runs) == len(STEPS)  # none more

    assert inline == on_loop
    assert _files(*roots) == inline_files
    # the replay did what it says: changes, refusals (usage 2, not found 1 …), dry runs
    codes = [code for _, code, _, _ in inline]
    assert sorted(codes)[-5:] == [0, 1, 2, 2, 2], inline
    assert "ctx: 8192" in config_path.read_text() and "mine" not in config_path.read_text()


def test_a_service_or_a_llama_swap_record_runs_the_edit_on_the_loop(
    tmp_path: Path, config_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where the follow-up may need to reach llama-swap, the edit runs as before: on anyio."""
    from backendmgr.swap.places import service_file, state_path

    write_gguf(tmp_path / "models" / f"{MODEL}.gguf", "qwen3", layers=36, ctx=40960)
    config_path.parent.mkdir(parents=True)
    config_path.write_text(f"models_dirs: [{json.dumps(str(tmp_path / 'models'))}]\n")
    loaded_after("generate")  # the first run keeps the config's parse
    heavy = ("asyncio", "anyio")
    out, loaded = loaded_after("set", MODEL, "ctx=4096", heavy=heavy)
    assert "set ctx=4096" in out and loaded == []

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    unit = service_file()
    unit.parent.mkdir(parents=True)
    unit.write_text("[Unit]\n")
    out, loaded = loaded_after("set", MODEL, "ctx=8192", heavy=heavy)
    assert "set ctx=8192" in out and loaded == list(heavy)
    unit.unlink()

    record = state_path(tmp_path / "home")  # a stale record: read on the loop, as before
    record.parent.mkdir(parents=True)
    record.write_text("{}")
    out, loaded = loaded_after("set", MODEL, "ctx=2048", heavy=heavy)
    assert "set ctx=2048" in out and loaded == list(heavy)


@pytest.mark.parametrize(
    ("words", "inline"),
    [
        (("activate", "llama-server@b1-cpu"), True),
        (("activate", "llama-server@b1-cpu", "--canary", "chat"), False),  # runs servers
        (("--json", "pin", "chat", "mine"), True),
        (("install", "llama-server"), False),
        (("tune", "chat", "--no-generate"), False),
    ],
)
def test_what_runs_inline(words: tuple[str, ...], inline: bool) -> None:
    from backendmgr.cli.parser import build_parser
    from backendmgr.manager import Manager

    args = build_parser(list(words)).parse_args(list(words))
    assert swap_cli.runs_inline(Manager(), args) is inline


def test_ctrl_c_while_an_inline_edit_waits_for_the_output_lock_is_cancelled(
    tmp_path: Path, config_path: Path
) -> None:
    """The regeneration waits for another writer's lock (with no loop) before the config is
    written (a change is checked whole first); a Ctrl-C there ends the command as on the
    loop: "cancelled", 130, and nothing changed."""
    import hashlib

    from filelock import FileLock

    write_gguf(tmp_path / "models" / f"{MODEL}.gguf", "qwen3", layers=36, ctx=40960)
    config_path.parent.mkdir(parents=True)
    config_path.write_text(f"models_dirs: [{json.dumps(str(tmp_path / 'models'))}]\n")
    ok_run = spawn_backendmgr("generate")
    assert finish(ok_run, 60)[0] and ok_run.returncode == 0
    output = config_path.parent / "llama-swap.yaml"
    before, names = output.read_bytes(), {p.name for p in config_path.parent.iterdir()}
    config = config_path.read_bytes()
    key = hashlib.sha256(str(output).encode()).hexdigest()[:16]
    with FileLock(tmp_path / "home" / "locks" / f"output-{key}.lock"):
        proc = spawn_backendmgr("set", MODEL, "ctx=4096")
        deadline = time.monotonic() + 30
        lock = config_path.with_name("config.yaml.lock")
        while not lock.exists():  # the config's lock held; now waiting for the output's
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.02)
        time.sleep(0.5)
        assert proc.poll() is None
        proc.send_signal(signal.SIGINT)
        out, err = finish(proc, 30)
    assert proc.returncode == 130 and err == "error: cancelled\n", (out, err)
    assert output.read_bytes() == before
    assert config_path.read_bytes() == config
    made = {p.name for p in config_path.parent.iterdir()} - names
    assert made == {"config.yaml.lock"}  # the edit's lock; no temporary file left


def test_run_inline_returns_and_raises_as_the_coroutine_does() -> None:
    async def answer() -> int:
        return await _inline.in_thread(lambda: 42)

    assert _inline.run_inline(answer()) == 42
    assert not _inline.inline()  # only while it runs

    async def refused() -> None:
        await _inline.sleep(0)
        raise ValueError("no")

    with pytest.raises(ValueError, match="no"):
        _inline.run_inline(refused())


@pytest.mark.parametrize("wait", ["asyncio", "anyio", "future"])
def test_a_coroutine_that_would_wait_on_a_loop_is_stopped(wait: str) -> None:
    import asyncio

    import anyio

    done: list[str] = []

    async def edit() -> None:
        try:
            if wait == "asyncio":
                await asyncio.sleep(0)  # a bare yield to the loop
            elif wait == "anyio":
                await anyio.sleep(0.01)  # anyio asks which loop runs: none
            else:
                await asyncio.sleep(0.01)  # asyncio asks for the running loop: none
            done.append("went on")
        finally:
            done.append("closed")

    with pytest.raises(_inline.WouldSuspend, match="needs an event loop"):
        _inline.run_inline(edit())
    assert done == ["closed"]  # stopped at the wait, its cleanup run, nothing after it


def test_in_thread_uses_a_worker_thread_on_a_loop_and_none_inline() -> None:
    """The web API's services stay off its loop; a probe's own loop inside an inline run is
    a loop too."""
    import threading

    import anyio

    async def where() -> bool:
        return await _inline.in_thread(lambda: threading.current_thread() is main)

    main = threading.current_thread()
    assert anyio.run(where) is False
    assert _inline.run_inline(where()) is True

    async def nested() -> bool:
        return anyio.run(where)  # as probe_build_sync does, under an inline run

    assert _inline.run_inline(nested()) is False


def test_an_inline_edit_that_would_wait_says_so_in_one_line(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A routing mistake is an internal error with its reason, never a half-run command."""
    import anyio

    from backendmgr.cli.commands import models as models_cli

    async def waits(mgr: Any, args: Any, out: Any) -> int:
        await anyio.sleep(0.01)
        return 0

    monkeypatch.setattr(models_cli, "generate", waits)
    line = error_line(cli("generate"))
    assert "needs an event loop but ran without one" in line


def test_a_cold_capability_probe_runs_within_an_inline_edit_and_ctrl_c_stops_it(
    tmp_path: Path, config_path: Path
) -> None:
    """A manual llama row not yet probed: the edit probes it on a loop of the probe's own (the
    rest stays inline), and a Ctrl-C during the probe stops the program and the command."""
    started = tmp_path / "started"
    server = tmp_path / "opt" / "llama-server"
    server.parent.mkdir()
    server.write_text(
        "#!/bin/sh\n"
        f"[ -e {started}.hang ] && {{ echo $$ > {started}; exec sleep 60; }}\n"
        'echo "  -c, --ctx-size N   size of the prompt context"\n'
    )
    server.chmod(0o755)
    write_gguf(tmp_path / "models" / f"{MODEL}.gguf", "qwen3", layers=36, ctx=40960)
    config_path.parent.mkdir(parents=True)
    config_path.write_text(
        f"models_dirs: [{json.dumps(str(tmp_path / 'models'))}]\n"
        f"backends:\n  - {{id: mine, kind: llama, path: {json.dumps(str(server))}}}\n"
    )
    out, loaded = loaded_after("set", MODEL, "ctx=4096", heavy=("anyio",))
    assert "set ctx=4096" in out and loaded == ["anyio"]  # the probe's loop, and only it
    assert str(server) in (tmp_path / "home" / "cache" / "capabilities.json").read_text()

    Path(f"{started}.hang").touch()
    server.write_text(server.read_text() + "\n")  # another size: probed again
    proc = spawn_backendmgr("set", MODEL, "ctx=8192")
    deadline = time.monotonic() + 30
    while not started.exists() or not started.read_text().strip():
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    out, err = finish(proc, 30)
    assert proc.returncode == 130 and err.splitlines()[-1] == "error: cancelled", (out, err)
    pid = int(started.read_text())
    deadline = time.monotonic() + 10
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.02)  # the probe's program was stopped with its group
    assert not Path(f"/proc/{pid}").exists()
