#!/usr/bin/env python3
"""Speed as ratios against references measured in the same run (see the README).

    .venv/bin/python scripts/bench.py [--quick] [--json]

Each line is the median of several runs of ours and of a reference, and their ratio. The
references are programs that are not ours: curl + sha256sum + tar, gguf-py's GGUFReader, the
interpreter's own start-up, and Python's stdlib http.server as the static file server.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from backendmgr.mirror import MirrorServer  # noqa: E402

PY = sys.executable


def median_time(fn: Callable[[], Any], runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _hwm_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def run_measured(argv: list[str], env: dict[str, str] | None = None) -> tuple[float, int]:
    """Wall seconds and peak RSS (KiB) of one child process.

    The peak is VmHWM polled from /proc: ru_maxrss would carry this (large) process's own
    high-water mark into the child across fork.
    """
    start = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    peak = 0
    while proc.poll() is None:
        peak = max(peak, _hwm_kib(proc.pid))
        time.sleep(0.002)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        err = proc.stderr.read().decode() if proc.stderr else ""
        raise SystemExit(f"{' '.join(argv[:4])}… failed: {err[-500:]}")
    return wall, peak


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class StaticRedirectMirror(MirrorServer):
    """Our API, but every download URL points at a static server that is not ours."""

    static_base = ""

    def releases(self, owner: str, repo: str) -> list[dict[str, Any]] | None:
        listing = super().releases(owner, repo)
        for release in listing or []:
            for asset in release["assets"]:
                rel = f"{owner}/{repo}/{release['tag_name']}/{asset['name']}"
                asset["browser_download_url"] = f"{self.static_base}/{rel}"
        return listing


def write_manifest(folder: Path, component: str, repo: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{component}.yaml").write_text(
        f"id: {component}\nkind: custom\nsource: {{type: github, repo: {repo}}}\n"
        f"exe: {{default: {component}}}\n"
        f"variants: [{{id: cpu, assets: {{linux-x64: ['{component}-.*\\.tar'], "
        f"linux-arm64: ['{component}-.*\\.tar']}}}}]\n"
    )


def make_release(root: Path, repo: str, component: str, size: int) -> Path:
    """A tar holding a script named ``component`` and ``size`` bytes of incompressible data."""
    folder = root / repo / "v1"
    folder.mkdir(parents=True, exist_ok=True)
    work = root.parent / f"build-{component}"
    work.mkdir(parents=True, exist_ok=True)
    (work / component).write_text("#!/bin/sh\necho bench 1.0\n")
    (work / component).chmod(0o755)
    with (work / "payload.bin").open("wb") as fh:
        left = size
        block = os.urandom(1 << 20)
        while left > 0:
            fh.write(block[: min(left, len(block))])
            left -= len(block)
    asset = folder / f"{component}-v1.tar"
    with tarfile.open(asset, "w") as tf:
        tf.add(work / component, arcname=f"{component}/{component}")
        tf.add(work / "payload.bin", arcname=f"{component}/payload.bin")
    shutil.rmtree(work)
    return asset


def bench_install(tmp: Path, size: int, runs: int) -> list[dict[str, Any]]:
    mirror_root = tmp / "mirror"
    asset = make_release(mirror_root, "bench/big", "bigtool", size)
    static_port = free_port()
    static = subprocess.Popen(
        [
            PY,
            "-m",
            "http.server",
            str(static_port),
            "--bind",
            "127.0.0.1",
            "--directory",
            str(mirror_root),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    server = StaticRedirectMirror(mirror_root)
    server.static_base = f"http://127.0.0.1:{static_port}"
    server.start()
    try:
        time.sleep(0.5)
        url = f"{server.static_base}/bench/big/v1/{asset.name}"

        def reference() -> None:
            work = Path(tempfile.mkdtemp(dir=tmp))
            subprocess.run(["curl", "-sf", "-o", str(work / "a.tar"), url], check=True)
            subprocess.run(
                ["sha256sum", str(work / "a.tar")], check=True, stdout=subprocess.DEVNULL
            )
            (work / "x").mkdir()
            subprocess.run(["tar", "-xf", str(work / "a.tar"), "-C", str(work / "x")], check=True)
            shutil.rmtree(work)

        peaks: list[int] = []

        def ours() -> None:
            work = Path(tempfile.mkdtemp(dir=tmp))
            config = work / "config.yaml"
            write_manifest(work / "manifests", "bigtool", "bench/big")
            env = {
                **os.environ,
                "BACKENDMGR_CONFIG": str(config),
                "BACKENDMGR_HOME": str(work / "home"),
                "BACKENDMGR_GITHUB_API": server.base_url,
                "BACKENDMGR_GPU": "none",
            }
            env.pop("BACKENDMGR_OFFLINE", None)
            _, peak = run_measured(
                [PY, "-m", "backendmgr", "-q", "install", "bigtool", "--no-generate"], env
            )
            peaks.append(peak)
            shutil.rmtree(work)

        ref = median_time(reference, runs)
        mine = median_time(ours, runs)
    finally:
        server.stop()
        static.terminate()
        static.wait()
    mib = size / (1 << 20)
    return [
        {
            "name": f"install {mib:.0f} MiB (vs curl+sha256sum+tar)",
            "ours_s": mine,
            "ref_s": ref,
            "ratio": mine / ref,
            "goal": "<= 1.0",
            "met": mine / ref <= 1.0,
        },
        {
            "name": "install peak RSS (MiB)",
            "ours_s": max(peaks) / 1024,
            "ref_s": None,
            "ratio": None,
            "goal": "< 100 MiB",
            "met": max(peaks) / 1024 < 100,
        },
    ]


def bench_concurrent(tmp: Path, size: int, throttle: int) -> dict[str, Any]:
    from backendmgr.config.paths import Paths
    from backendmgr.manager import Manager

    mirror_root = tmp / "mirror3"
    names = ["alpha", "beta", "gamma"]
    for name in names:
        make_release(mirror_root, f"bench/{name}", name, size)
    server = MirrorServer(mirror_root, throttle=throttle).start()
    try:

        def manager(work: Path) -> Manager:
            for name in names:
                write_manifest(work / "manifests", name, f"bench/{name}")
            env = {**os.environ, "BACKENDMGR_GITHUB_API": server.base_url, "BACKENDMGR_GPU": "none"}
            env.pop("BACKENDMGR_OFFLINE", None)
            return Manager(
                Paths.resolve(config=work / "config.yaml", home=work / "home"), environ=env
            )

        async def parallel() -> None:
            mgr = manager(Path(tempfile.mkdtemp(dir=tmp)))
            await asyncio.gather(*(mgr.install(n, generate=False) for n in names))

        async def sequential() -> None:
            mgr = manager(Path(tempfile.mkdtemp(dir=tmp)))
            for n in names:
                await mgr.install(n, generate=False)

        seq = median_time(lambda: asyncio.run(sequential()), 1)
        par = median_time(lambda: asyncio.run(parallel()), 1)
    finally:
        server.stop()
    return {
        "name": "3 installs at once (vs one after another)",
        "ours_s": par,
        "ref_s": seq,
        "ratio": par / seq,
        "goal": "<= 0.4",
        "met": par / seq <= 0.4,
    }


def realistic_gguf(path: Path, vocab: int) -> None:
    import gguf
    import numpy as np

    w = gguf.GGUFWriter(str(path), "qwen3")
    w.add_name("bench")
    w.add_block_count(36)
    w.add_context_length(40960)
    w.add_embedding_length(4096)
    w.add_head_count(32)
    w.add_head_count_kv(8)
    w.add_key_length(128)
    w.add_value_length(128)
    w.add_tokenizer_model("gpt2")
    w.add_token_list([f"tok{i}" for i in range(vocab)])
    w.add_token_types([1] * vocab)
    w.add_token_merges([f"t o{i}" for i in range(vocab)])
    w.add_chat_template(
        "{% for m in messages %}<|im_start|>{{m.role}}\n{{m.content}}<|im_end|>\n{% endfor %}" * 20
    )
    for i in range(320):
        w.add_tensor(f"blk.{i}.w", np.zeros((2, 2), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def bench_gguf(tmp: Path, files: int, ref_files: int, vocab: int) -> list[dict[str, Any]]:
    from gguf import GGUFReader

    from backendmgr.discovery.gguf import read_gguf_metadata
    from backendmgr.discovery.walk import discover, scan_folders

    folder = tmp / "ggufs"
    folder.mkdir()
    realistic_gguf(folder / "m0000.gguf", vocab)
    for i in range(1, files):
        shutil.copyfile(folder / "m0000.gguf", folder / f"m{i:04d}.gguf")
    paths = sorted(folder.glob("*.gguf"))
    ours_cold = median_time(lambda: [read_gguf_metadata(p) for p in paths], 3) / len(paths)
    ref = median_time(lambda: [GGUFReader(p) for p in paths[:ref_files]], 1) / ref_files
    cache = tmp / "gguf-cache.json"
    discover(scan_folders([str(folder)]), cache)
    warm = median_time(lambda: discover(scan_folders([str(folder)]), cache), 3) / len(paths)
    return [
        {
            "name": f"GGUF header cold, {vocab}-token vocab (vs GGUFReader)",
            "ours_s": ours_cold,
            "ref_s": ref,
            "ratio": ours_cold / ref,
            "goal": "<= 0.05 (20x)",
            "met": ref / ours_cold >= 20,
        },
        {
            "name": "GGUF discovery warm, cache hit (vs GGUFReader)",
            "ours_s": warm,
            "ref_s": ref,
            "ratio": warm / ref,
            "goal": "<= 0.01 (100x)",
            "met": ref / warm >= 100,
        },
    ]


def bench_generate(tmp: Path, models: int) -> list[dict[str, Any]]:
    sys.path.insert(0, str(ROOT))
    from tests.ggufs import write_gguf

    folder = tmp / "many"
    write_gguf(folder / "model-0000.gguf", "llama", layers=32, ctx=131072)
    for i in range(1, models):
        shutil.copyfile(folder / "model-0000.gguf", folder / f"model-{i:04d}.gguf")
    config = tmp / "gen" / "config.yaml"
    config.parent.mkdir()
    config.write_text(f"models_dirs: [{json.dumps(str(folder))}]\n")
    env = {
        **os.environ,
        "BACKENDMGR_CONFIG": str(config),
        "BACKENDMGR_HOME": str(tmp / "genh"),
        "BACKENDMGR_VRAM_GB": "24",
        "BACKENDMGR_GPU": "none",
    }
    argv = [PY, "-m", "backendmgr", "-q", "generate", "--force"]
    cold_wall, cold_rss = run_measured(argv, env)
    warm = [run_measured(argv, env) for _ in range(3)]
    warm_wall = statistics.median(w for w, _ in warm)
    warm_rss = max(r for _, r in warm) / 1024
    base, _ = run_measured([PY, "-c", "pass"])
    return [
        {
            "name": f"generate {models} models cold",
            "ours_s": cold_wall,
            "ref_s": None,
            "ratio": None,
            "goal": "-",
            "met": True,
            "rss_mib": cold_rss / 1024,
        },
        {
            "name": f"generate {models} models warm",
            "ours_s": warm_wall,
            "ref_s": base,
            "ratio": warm_wall / base,
            "goal": "< 0.5 s, < 150 MiB",
            "met": warm_wall < 0.5 and warm_rss < 150,
            "rss_mib": warm_rss,
        },
    ]


def bench_startup(runs: int) -> list[dict[str, Any]]:
    base = statistics.median(run_measured([PY, "-c", "pass"])[0] for _ in range(runs))
    out = []
    for args in (["--help"], ["list"]):
        t = statistics.median(run_measured([PY, "-m", "backendmgr", *args])[0] for _ in range(runs))
        out.append(
            {
                "name": f"backendmgr {' '.join(args)} (vs python -c pass)",
                "ours_s": t,
                "ref_s": base,
                "ratio": t / base,
                "goal": "<= 4.0",
                "met": t / base <= 4,
            }
        )
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    q = args.quick
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="backendmgr-bench-") as name:
        tmp = Path(name)
        os.environ["BACKENDMGR_HOME"] = str(tmp / "home-startup")
        os.environ["BACKENDMGR_CONFIG"] = str(tmp / "cfg-startup" / "config.yaml")
        rows += bench_startup(3 if q else 10)
        rows += bench_gguf(tmp, 5 if q else 200, 1 if q else 5, 2000 if q else 150_000)
        rows += bench_generate(tmp, 20 if q else 1000)
        rows.append(bench_concurrent(tmp, (1 if q else 16) << 20, (4 if q else 16) << 20))
        rows += bench_install(tmp, (16 if q else 1024) << 20, 1 if q else 3)
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(
        f"{'benchmark (medians; times in ms)':58} {'ours':>10} {'reference':>10} {'ratio':>8}  goal"
    )
    for r in rows:
        is_mib = r["name"].endswith("(MiB)")
        ours = f"{r['ours_s']:.1f}" if is_mib else f"{r['ours_s'] * 1000:.3f}"
        ref = f"{r['ref_s'] * 1000:.3f}" if r["ref_s"] is not None else "-"
        ratio = f"{r['ratio']:.4f}" if r["ratio"] is not None else "-"
        mark = "ok" if r["met"] else "MISSED"
        extra = f" (peak {r['rss_mib']:.0f} MiB)" if "rss_mib" in r else ""
        print(f"{r['name']:58} {ours:>10} {ref:>10} {ratio:>8}  {r['goal']} {mark}{extra}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
