from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from tests.conftest import ROOT


@pytest.mark.skipif(shutil.which("curl") is None, reason="the install reference needs curl")
def test_bench_quick_smoke_run() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "bench.py"), "--quick", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    rows = json.loads(done.stdout)
    names = [r["name"] for r in rows]
    assert any(n.startswith("install") for n in names)
    assert any(n.startswith("GGUF header cold") for n in names)
    assert all(r["ours_s"] > 0 for r in rows)
