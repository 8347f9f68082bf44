from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import tarfile
import threading
from collections.abc import Iterable
from pathlib import Path

import httpx
import pytest

from tests.support.paths import ROOT

DEMO = str(ROOT / "scripts" / "demo.py")


@pytest.mark.slow(reason="the whole demo: a dozen commands, installs and a verify, end to end")
def test_demo_runs_offline_and_cleans_up(tmp_path: Path) -> None:
    """The journey; ``--keep`` leaves its releases, and the two commands it prints install
    from them (issue 20: a build without GitHub)."""
    releases = tmp_path / "releases"
    done = subprocess.run(
        [sys.executable, DEMO, "--keep", str(releases)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    out = done.stdout
    assert "installed llama-server@b11211-vulkan and activated it" in out
    assert 'pinned "qwen3-8b-q4_k_m" to "llama-server@b11100-vulkan"' in out
    # the capability-driven decision: b11100's --help lists no --jinja, so the pin drops it
    pin_step = out.split("$ backendmgr pin ")[1].split("\n== ")[0]
    assert "+  # NOTE --jinja left out: llama-server@b11100-vulkan does not list it in --help" in (
        pin_step
    )
    assert "-      --jinja" in pin_step
    assert "activated llama-server@b11211-cpu" in out
    verify_step = out.split("$ backendmgr verify")[1].split("\n== ")[0]
    assert "llama-3.2-3b-q8_0: ok in " in verify_step and "qwen3-8b-q4_k_m: ok in " in verify_step
    # issue 22: one repair (the old build does not know olmo3) and one tune
    repair = out.split("$ backendmgr verify --repair")[1].split("\n== ")[0]
    assert "unknown-architecture: this build does not know the model's architecture 'olmo3'" in (
        repair
    )
    assert "pinned to llama-server@b11211-" in repair and "(failed on llama-server@b11100" in repair
    tune = out.split("$ backendmgr tune")[1].split("\n== ")[0]
    assert " fits (" in tune and "measured by resident memory" in tune and "+      -c " in tune
    assert "everything is consistent" in out
    if (ROOT.parent / "shared" / "llama-swap" / "bin" / "llama-swap").is_file():  # journey 4
        assert "installed llama-swap@v250-any and activated it" in out
        assert "answer: hello" in out  # through the proxy, from the emitted cmd's server
        assert "llama-swap reloaded " in out
        started = out.split("the next start runs ")[1].splitlines()[0]
        assert started.endswith("/builds/llama-server/b11100-vulkan/build/bin/llama-server")
        assert "stopped llama-swap and every model server it started" in out
    else:
        assert "llama-swap: skipped, no llama-swap binary" in out
    tmp = out.split("/home/builds/")[0].rsplit(" ", 1)[-1].strip()
    assert "backendmgr-demo-" in tmp
    assert not Path(tmp).exists()
    # it ends with a way to see the same on the page that works as written: no folder to make up
    assert out.rstrip().splitlines()[-1] == (
        "See the same on a web page: scripts/demo --ui (serves this demo's mirror and a fresh "
        "home at http://127.0.0.1:8577 until Ctrl-C)"
    )
    assert "MIRROR_DIR" not in out
    said = out.split(f"The demo's releases are kept in {releases} ")[1].splitlines()
    serve_it, point_at_it = [line.strip() for line in said[1:3]]
    assert point_at_it == (
        "BACKENDMGR_GITHUB_API=http://127.0.0.1:8765 backendmgr install llama-server"
    )
    assert serve_it == f"{ROOT / 'scripts' / 'mirror.py'} {releases}"
    # issue 33: the model files are kept too, with the one command that points backendmgr at them
    assert said[4].strip() == f"backendmgr models add-dir {releases / 'models'}"
    assert {p.name for p in (releases / "models").iterdir()} >= {"qwen3-8b-q4_k_m.gguf"}
    # the stand-in builds name no interpreter of this clone: they run wherever the folder goes
    archive = next((releases / "ggml-org" / "llama.cpp" / "b11211").glob("*.tar.gz"))
    with tarfile.open(archive) as tf:
        members = {m.name.rsplit("/", 1)[-1]: m for m in tf.getmembers()}
        server = tf.extractfile(members["llama-server"])
        stand_in = tf.extractfile(members["demo-server.py"])
        assert server is not None and stand_in is not None
        assert sys.executable.encode() not in server.read()
        assert stand_in.read().startswith(b"#!/usr/bin/env python3\n")
        assert members["demo-server.py"].mode & 0o111
    assert sorted(p.name for p in (releases / "ggml-org" / "llama.cpp").iterdir()) == [
        "b11100",
        "b11211",
    ]
    mirror = subprocess.Popen(
        [sys.executable, *serve_it.split(), "--port", "0"],  # 8765 may be taken here
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert mirror.stdout is not None
        api = mirror.stdout.readline().split(" at ")[1].split()[0]
        env = {k: v for k, v in os.environ.items() if k != "BACKENDMGR_OFFLINE"}
        installed = subprocess.run(
            [sys.executable, "-m", "backendmgr", "install", "llama-server"],
            env={**env, "BACKENDMGR_GITHUB_API": api},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    finally:
        mirror.terminate()
        mirror.wait(timeout=10)
    assert installed.returncode == 0, installed.stderr
    assert installed.stdout.startswith("installed llama-server@b11211-cpu"), installed.stdout


def _lines(stream: Iterable[str], into: queue.Queue[str]) -> None:
    """Each line the demo prints, then "" at its end: a reader that a timeout can wait on."""
    for line in stream:
        into.put(line)
    into.put("")  # the end


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_demo_ui_serves_the_demo_and_stops_clean(tmp_path: Path, stop: signal.Signals) -> None:
    """``--ui`` installs into the demo's own home and serves it; a signal stops the server and
    the mirror, removes the temporary folder and exits 0 without a traceback."""
    env = {**os.environ, "TMPDIR": str(tmp_path), "PYTHONUNBUFFERED": "1"}
    demo = subprocess.Popen(
        [sys.executable, DEMO, "--ui", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        start_new_session=True,  # its own group: a failed test can stop the server and mirror
    )
    seen: list[str] = []
    try:
        lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=_lines, args=(demo.stdout, lines), daemon=True).start()
        url = None
        while url is None:
            line = lines.get(timeout=120)
            assert line, "the demo ended before serving:\n" + "".join(seen)
            seen.append(line)
            if line.startswith("page: "):
                url = line.split()[1]
        folder = Path(next(s for s in seen if s.startswith("demo folder: ")).split()[2])
        assert folder.parent == tmp_path and folder.is_dir()
        base, _, token = url.partition("/?token=")
        assert base.startswith("http://127.0.0.1:") and not base.endswith(":8577")
        assert len(token) >= 40  # the demo's home's secret, as serve printed it

        with httpx.Client(trust_env=False, timeout=30) as client:
            assert client.get(base + "/api/builds").status_code == 401  # not without it
            page = client.get(url, follow_redirects=True)
            assert page.status_code == 200 and "<html" in page.text.lower()
            assert str(page.url) == base + "/"
            builds = client.get(base + "/api/builds")
            assert builds.status_code == 200
            listed = {b["id"]: b for b in builds.json()}
        assert listed["llama-server@b11211-vulkan"]["activated"] is True
        assert listed["llama-server@b11100-vulkan"]["activated"] is False
        assert listed["llama-server@b11211-vulkan"]["dir"].startswith(str(folder / "home"))

        demo.send_signal(stop)
        assert demo.wait(timeout=60) == 0
        while line := lines.get(timeout=10):
            seen.append(line)
    finally:
        try:  # whatever is left of the demo's process group: none of it should be
            os.killpg(demo.pid, signal.SIGKILL)
            left = True
        except ProcessLookupError:
            left = False
        demo.wait()
    out = "".join(seen)
    assert "Traceback" not in out, out
    assert not left, "the server or the mirror outlived the demo"
    assert out.rstrip().endswith("the demo folder is removed"), out
    assert not folder.exists()
    assert not list(tmp_path.glob("backendmgr-demo-*"))
    with pytest.raises(httpx.TransportError):  # the server is gone too
        httpx.get(url, timeout=5, trust_env=False)


def test_demo_port_without_ui_is_refused(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, DEMO, "--port", "9000"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "TMPDIR": str(tmp_path)},
    )
    assert done.returncode == 2
    assert (
        done.stderr.strip().splitlines()[-1]
        == "scripts/demo: error: --port and --open go with --ui"
    )
    assert done.stdout == "" and not list(tmp_path.iterdir())
