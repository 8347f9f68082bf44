from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from tests.support.paths import ROOT

TOOLS = ("curl", "openssl", "tar", "unzip", "bash")


@pytest.mark.skipif(
    any(shutil.which(t) is None for t in TOOLS), reason="the install references need " + str(TOOLS)
)
@pytest.mark.slow(reason="times backendmgr against the reference tools, several rounds each")
def test_bench_quick_run_interleaves_and_computes_goals() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "bench.py"), "--quick", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    doc = json.loads(done.stdout)
    assert doc["machine"]["cores"] >= 1 and doc["machine"]["cpu"]
    rows = {r["name"]: r for r in doc["rows"]}
    names = list(rows)
    for prefix in (
        "install 7 MiB .tar.gz",
        "install 7 MiB .zip",
        "GGUF header cold",
        "generate 5 models cold",
        "3 installs",
        "backendmgr ins<TAB>",
        "backendmgr models",
        "backendmgr set m0001 ctx=N",
        "backendmgr pin/unpin m0002",
    ):
        assert any(n.startswith(prefix) for n in names), (prefix, names)
    for r in doc["rows"]:
        assert "skipped" not in r, r
        assert r["ours"]["min"] <= r["ours"]["median"] <= r["ours"]["max"]
        if "ref_samples" in r:
            # interleaved pairs: as many samples of ours as of the reference
            assert len(r["ref_samples"]) == len(r["ours_samples"]) >= 2
            assert r["ratio"] == pytest.approx(r["ours"]["median"] / r["ref"]["median"])
        if r["goal"] == "<= 1.0":
            assert r["met"] == (r["ratio"] <= 1.0)  # computed, not written down
    for r in doc["rows"]:
        if r["name"].startswith("install 7 MiB"):  # each stage's share names a regression
            assert {"start", "download", "hash", "smoke", "commit", "after"} <= set(r["stages"]), r
            assert all(0 <= s["share"] <= 1 for s in r["stages"].values()), r["stages"]
    peak = rows["install peak RSS, MiB"]
    assert peak["met"] == (peak["ours"]["median"] < 100)


def test_bench_says_which_reference_tool_is_missing(tmp_path: pytest.TempPathFactory) -> None:
    """With no curl on PATH, the install cases are skipped with a line that names it."""
    bin_dir = tmp_path / "bin"  # type: ignore[operator]
    bin_dir.mkdir()
    for tool in ("openssl", "tar", "gzip", "unzip", "bash"):
        found = shutil.which(tool)
        if found:
            (bin_dir / tool).symlink_to(found)
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "bench.py"),
            "--quick",
            "--json",
            "--only",
            "install",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={"PATH": str(bin_dir), "HOME": str(tmp_path)},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "reference tool(s) missing: curl" in done.stderr
    rows = json.loads(done.stdout)["rows"]
    skipped = [r for r in rows if r["name"].startswith("install")]
    assert skipped and all("curl" in r["skipped"] for r in skipped)
