"""Installs in real child processes: concurrent installs, kill -9, Ctrl-C."""

from __future__ import annotations

import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from backendmgr.mirror import MirrorServer
from tests.install.test_download import big_release
from tests.support import tree


def spawn(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "backendmgr", *args],
        env=dict(os.environ),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "backendmgr", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def wait_for_part(home: Path, timeout: float = 30) -> Path:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        parts = list((home / "downloads").glob("*.part"))
        if parts and parts[0].stat().st_size > 0:
            return parts[0]
        time.sleep(0.02)
    raise AssertionError("no partial download appeared")


def test_two_processes_install_the_same_build_once(
    mirror: MirrorServer, mirror_root: Path, tmp_path: Path
) -> None:
    big_release(mirror_root)
    mirror.throttle = 1 << 20  # about 3 s: the second starts well before the first is done
    first = spawn("install", "llama-server")
    wait_for_part(tmp_path / "home")
    second = spawn("install", "llama-server")
    out1, err1 = first.communicate(timeout=120)
    out2, err2 = second.communicate(timeout=120)
    assert (first.returncode, second.returncode) == (0, 0), (err1, err2)
    assert out1.startswith("installed llama-server@b100-vulkan")
    assert f"waiting for another backendmgr (pid {first.pid}) installing" in err2, (out2, err2)
    assert out2.startswith(
        "llama-server@b100-vulkan was installed by another backendmgr while this one waited"
    ), out2
    third = run("install", "llama-server")
    assert third.stdout.startswith("llama-server@b100-vulkan is already installed"), third
    assert "waiting for" not in third.stderr
    builds = tmp_path / "home" / "builds" / "llama-server"
    assert [p.name for p in builds.iterdir()] == ["b100-vulkan"]
    assert len([p for p, _ in mirror.requests if p.startswith("/download/")]) == 1


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
    part = wait_for_part(home)
    time.sleep(0.3)
    started = time.monotonic()
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert time.monotonic() - started < 3
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
