from __future__ import annotations

import subprocess
import sys

from tests.conftest import ROOT


def test_demo_runs_offline_and_cleans_up() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "demo.py")],
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
    assert "everything is consistent" in out
    tmp = out.split("/home/builds/")[0].rsplit(" ", 1)[-1].strip()
    assert "backendmgr-demo-" in tmp
    from pathlib import Path

    assert not Path(tmp).exists()
