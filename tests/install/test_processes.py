"""Installs in real child processes: concurrent installs, kill -9, Ctrl-C."""

from __future__ import annotations

import hashlib
import json
import random
import signal
import subprocess
import threading
import time
from functools import partial
from pathlib import Path

import pytest

from backendmgr.mirror import MirrorHandler, MirrorServer
from tests.support import DownloadGates, big_release, publish_llama, tree, wait_until
from tests.support.cli import completed, run_in_process, spawn_backendmgr

# Where a release's size is not the point, a small one keeps the steps around it quick.
SMALL = 1024


def spawn(*args: str) -> subprocess.Popen[str]:
    return spawn_backendmgr(*args)


def run(*args: str) -> subprocess.CompletedProcess[str]:
    """A command whose result only shows the state left behind: in this process."""
    return completed(run_in_process(*args), *args)


def wait_for_part(home: Path, proc: subprocess.Popen[str], at_least: int = 1) -> Path:
    """The install's partial download, once it holds ``at_least`` bytes."""

    def part() -> Path | None:
        parts = list((home / "downloads").glob("*.part"))
        return parts[0] if parts and parts[0].stat().st_size >= at_least else None

    return wait_until(part, "a partial download appeared", timeout=120, proc=proc)


def test_two_processes_install_the_same_build_once(
    mirror: MirrorServer, mirror_root: Path, tmp_path: Path
) -> None:
    big_release(mirror_root, size=SMALL)
    # the first install's download is held until the second says it waits for the first: the
    # overlap is awaited, not left to how fast a loaded machine starts the second interpreter
    downloading, waited = threading.Event(), threading.Event()

    def hold(handler: MirrorHandler) -> bool:
        if handler.route.startswith("/download/"):
            downloading.set()
            waited.wait(120)
        return False

    mirror.hooks.append(hold)
    first = spawn("install", "llama-server")
    wait_until(downloading.is_set, "the first install began its download", timeout=120, proc=first)
    second = spawn("install", "llama-server")
    assert second.stderr is not None
    err_lines: list[str] = []

    def read_err() -> None:
        assert second.stderr is not None
        for line in second.stderr:
            err_lines.append(line)
            if "waiting for another backendmgr" in line:
                waited.set()

    reader = threading.Thread(target=read_err, daemon=True)
    reader.start()
    try:
        wait_until(
            waited.is_set, "the second install waited for the first", timeout=120, proc=second
        )
    finally:
        waited.set()
    out1, err1 = first.communicate(timeout=120)
    out2 = second.communicate(timeout=120)[0]
    reader.join(10)
    err2 = "".join(err_lines)
    assert (first.returncode, second.returncode) == (0, 0), (err1, err2)
    assert out1.startswith("installed llama-server@b100-vulkan")
    assert f"waiting for another backendmgr (pid {first.pid}) installing" in err2, (out2, err2)
    assert out2.startswith(
        "another backendmgr installed llama-server@b100-vulkan while this one waited"
    ), out2
    third = run("install", "llama-server")
    assert third.stdout.startswith("llama-server@b100-vulkan is already installed"), third
    assert "waiting for" not in third.stderr
    builds = tmp_path / "home" / "builds" / "llama-server"
    assert [p.name for p in builds.iterdir()] == ["b100-vulkan"]
    assert len([p for p, _ in mirror.requests if p.startswith("/download/")]) == 1


@pytest.mark.slow(reason="ten real installs killed at random moments (seeded)")
def test_kill_9_at_random_points_leaves_a_consistent_state(
    mirror: MirrorServer, mirror_root: Path, tmp_path: Path
) -> None:
    big_release(mirror_root)
    mirror.throttle = 12 << 20  # the whole install takes about half a second
    rng = random.Random(20261129)
    for _ in range(10):
        proc = spawn("install", "llama-server", "--reinstall")
        time.sleep(rng.uniform(0.05, 1.0))
        proc.kill()
        proc.communicate(timeout=30)
        listed = run("--json", "list")
        assert listed.returncode == 0, listed.stderr
        for build in json.loads(listed.stdout):  # whatever is listed is whole
            assert Path(build["path"]).is_file()
            assert run("--json", "backends").returncode == 0
    fixed = run("doctor", "--fix")
    assert fixed.returncode == 0, fixed.stderr
    assert run("doctor").returncode == 0
    mirror.throttle = None
    final = run("install", "llama-server")
    assert final.returncode == 0, final.stderr
    assert run("doctor").returncode == 0
    builds = tmp_path / "home" / "builds" / "llama-server"
    assert [p.name for p in builds.iterdir()] == ["b100-vulkan"]


def test_ctrl_c_exits_130_keeps_part_and_resumes(
    mirror: MirrorServer, mirror_root: Path, tmp_path: Path, config_path: Path
) -> None:
    data = big_release(mirror_root)
    mirror.throttle = 512 << 10
    home = tmp_path / "home"
    proc = spawn("install", "llama-server")
    part = wait_for_part(home, proc, at_least=64 << 10)  # well into the download
    started = time.monotonic()
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert time.monotonic() - started < 10  # at once, on a loaded machine too
    assert "Traceback" not in err and err.rstrip().splitlines()[-1] == "error: cancelled"
    kept = part.stat().st_size
    assert 0 < kept < len(data)
    assert (
        tree(home / "builds" / "llama-server") == []
        if (home / "builds" / "llama-server").exists()
        else True
    )
    assert not config_path.exists()

    mirror.throttle = None
    mirror.requests.clear()
    done = run("install", "llama-server")
    assert done.returncode == 0, done.stderr
    (headers,) = [h for p, h in mirror.requests if p.startswith("/download/")]
    assert int(headers["Range"][len("bytes=") : -1]) >= kept
    assert not part.exists()
    (listed,) = json.loads(run("--json", "list").stdout)
    assert listed["id"] == "llama-server@b100-vulkan"
    assert listed["sha256"] == hashlib.sha256(data).hexdigest()


THREE = ("b11100", "b11150", "b11211")


@pytest.mark.parametrize(
    "order",
    [THREE, ("b11150", "b11100", "b11211"), ("b11211", "b11100", "b11150"), ()],
    ids=["oldest-first", "middle-first", "newest-first", "all-at-once"],
)
def test_three_concurrent_installs_into_an_empty_home_activate_the_newest(
    mirror: MirrorServer, mirror_root: Path, tmp_path: Path, order: tuple[str, ...]
) -> None:
    """Three processes start in an empty home; their downloads are let through in ``order``
    (each one registered before the next goes on; ``()``: all at once, twice): whichever
    registers first, the newest release of the variant ends activated."""
    for i, tag in enumerate(THREE):
        publish_llama(mirror_root, tag, published_at=f"2026-09-0{i + 1}T00:00:00Z")
    for round_ in range(1 if order else 2):
        root = tmp_path / f"round{round_}"
        flags = ["--home", str(root / "home"), "--config", str(root / "cfg" / "config.yaml")]
        mirror.hooks.clear()
        gates = DownloadGates(mirror, THREE)
        procs = {tag: spawn(*flags, "install", "llama-server", tag) for tag in THREE}
        said: dict[str, str] = {}
        try:
            wait_until(partial(gates.began, 3), "the three downloads began", timeout=120)
            for tag in order or THREE:
                gates.open(*([tag] if order else THREE))
                said[tag], err = procs[tag].communicate(timeout=120)
                assert procs[tag].returncode == 0, err
                assert "Traceback" not in err
        finally:
            gates.open()
            for proc in procs.values():
                if proc.poll() is None:
                    proc.kill()
                    proc.communicate(timeout=30)
        listed = run(*flags, "--json", "list")
        assert listed.returncode == 0, listed.stderr
        active = [b["id"] for b in json.loads(listed.stdout) if b["activated"]]
        assert active == ["llama-server@b11211-vulkan"], (order, active)
        if order and order[0] == "b11211":  # the later ones say which build runs instead
            newer = "llama-server@b11211-vulkan, newer and installed meanwhile, is the activated"
            assert all(newer in said[tag] for tag in order[1:]), said
        assert run(*flags, "doctor").returncode == 0
