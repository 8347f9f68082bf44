#!/usr/bin/env python3
"""Speed as ratios against references measured in the same run, with their spread.

    .venv/bin/python scripts/bench.py [--quick] [--json] [--runs N]

Every comparison runs ours and a reference interleaved (A B A B ...), at least five times
each (``--quick`` shrinks sizes and runs for the test suite), and prints the median with the
min-max range; ``--json`` carries every sample. Goals are computed from the measurements.

References are programs that are not ours: ``curl | tee | openssl dgst -sha256`` then
``tar -xzf`` or ``unzip``, served by the same mirror process that serves our install; gguf-py's
GGUFReader; the interpreter's own start-up. The archive cases (``--only bound,zeros,entries``):
a decompression-bound ``.tar.gz`` (a few library-like files) against the same pipeline; 1 GiB
of zeros against the realistic install, with its peak memory; 100 001 empty files and a split
bomb, refused.
Each install case also prints its stage split (install/stages.py: start-up, download,
hashing, inflating, tar headers, file writes, smoke check, commit), so that a slower install
names the stage that got slower.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import shlex
import shutil
import socket
import statistics
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from backendmgr.mirror import MirrorHandler, MirrorServer  # noqa: E402

PY = sys.executable
REFERENCE_TOOLS = ("curl", "openssl", "tar", "gzip", "unzip", "bash")
Sample = tuple[float, int]  # wall seconds, peak RSS KiB (0 when not measured)


def machine() -> dict[str, Any]:
    """What the figures were measured on."""
    cpu = platform.processor() or "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = 0
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem = int(line.split()[1]) // 1024
    except (OSError, ValueError):
        pass
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {
        "cpu": cpu,
        "cores": usable,
        "memory_mib": mem,
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "load_1min": round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None,
    }


def missing_tools() -> list[str]:
    return [t for t in REFERENCE_TOOLS if shutil.which(t) is None]


def _hwm_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def run_measured(
    argv: list[str], env: dict[str, str] | None = None, *, expect: int = 0, says: str = ""
) -> Sample:
    """Wall seconds and peak RSS (KiB) of one child process, which must exit with ``expect``
    (and print ``says`` on stderr).

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
    err = proc.stderr.read().decode() if proc.stderr else ""
    if proc.returncode != expect or says not in err:
        raise SystemExit(f"{' '.join(argv[:6])}... exited {proc.returncode}: {err[-800:]}")
    return wall, peak


def interleaved(
    a: Callable[[], Sample], b: Callable[[], Sample], runs: int
) -> tuple[list[Sample], list[Sample]]:
    """``runs`` samples of each, taken A B A B ... so that drift hits both sides alike."""
    xs: list[Sample] = []
    ys: list[Sample] = []
    for _ in range(runs):
        xs.append(a())
        ys.append(b())
    return xs, ys


def timed(fn: Callable[[], Any]) -> Sample:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start, 0


def stats(samples: list[float]) -> dict[str, float]:
    return {"median": statistics.median(samples), "min": min(samples), "max": max(samples)}


def row(
    name: str,
    ours: list[Sample],
    ref: list[Sample] | None,
    goal: str,
    met: Callable[[float], bool] | None,
    *,
    scale: float = 1.0,
    note: str = "",
) -> dict[str, Any]:
    """One comparison: all samples, medians, spread, and the goal checked on the ratio."""
    ours_s = [w * scale for w, _ in ours]
    out: dict[str, Any] = {"name": name, "ours": stats(ours_s), "ours_samples": ours_s}
    peaks = [p for _, p in ours if p]
    if peaks:
        out["peak_rss_mib"] = max(peaks) / 1024
    if ref is not None:
        ref_s = [w * scale for w, _ in ref]
        out["ref"] = stats(ref_s)
        out["ref_samples"] = ref_s
        out["ratio"] = out["ours"]["median"] / out["ref"]["median"]
    else:
        out["ratio"] = None
    out["goal"] = goal
    value = out["ratio"] if out["ratio"] is not None else out["ours"]["median"]
    out["met"] = None if met is None else bool(met(value))
    if note:
        out["note"] = note
    return out


def skipped(name: str, reason: str) -> dict[str, Any]:
    print(f"bench: skipping {name!r}: {reason}", file=sys.stderr)
    return {"name": name, "skipped": reason, "met": None}


# ---------------------------------------------------------------------------------------------
# a realistic release asset


def _blocks(seed: int) -> list[bytes]:
    """1 MiB blocks that compress like machine code: mostly random, some runs and text."""
    rnd = random.Random(seed)
    out = []
    for _ in range(8):
        body = bytearray(rnd.randbytes(1 << 20))
        for _ in range(32):  # 1/8 of each block is zeros and repeated symbol text
            at = rnd.randrange(0, (1 << 20) - 4096)
            body[at : at + 4096] = (b"\0" * 2048) + (b"_ZN4ggml6tensorE" * 128)
        out.append(bytes(body))
    return out


def build_tree(work: Path, component: str, size: int) -> Path:
    """A release tree: the executable, a few large shared libraries (with symlink chains),
    many small files (headers, licences, python helpers), about ``size`` bytes in all."""
    top = work / f"{component}-v1"
    (top / "lib").mkdir(parents=True)
    (top / "include").mkdir()
    (top / "share" / "py").mkdir(parents=True)
    exe = top / component
    exe.write_text("#!/bin/sh\necho bench 1.0\n")
    exe.chmod(0o755)
    small_count = max(50, min(3000, size // (256 << 10)))
    rnd = random.Random(7)
    text = b"static inline int ggml_op(struct ggml_tensor * t) { return t->ne[0]; }\n"
    small_total = 0
    for i in range(small_count):
        folder = top / ("include" if i % 2 else "share/py")
        data = text * rnd.randrange(8, 120)
        (folder / f"f{i:05d}.{'h' if i % 2 else 'py'}").write_bytes(data)
        small_total += len(data)
    blocks = _blocks(1)
    libs = 4
    per_lib = max(1 << 20, (size - small_total) // libs)
    for n in range(libs):
        real = top / "lib" / f"libggml{n}.so.0.{n}.1"
        with real.open("wb") as fh:
            left = per_lib
            i = n
            while left > 0:
                block = blocks[i % len(blocks)]
                fh.write(block[: min(left, len(block))])
                left -= len(block)
                i += 3
        # libggmlN.so -> libggmlN.so.0 -> libggmlN.so.0.N.1, as llama.cpp ships them
        (top / "lib" / f"libggml{n}.so.0").symlink_to(real.name)
        (top / "lib" / f"libggml{n}.so").symlink_to(f"libggml{n}.so.0")
    return top


def make_assets(mirror_root: Path, size: int) -> dict[str, Path]:
    """The same tree as ``.tar.gz`` and ``.zip`` releases (one repository each)."""
    work = mirror_root.parent / "tree"
    top = build_tree(work, "bigtool", size)
    out = {}
    tgz_dir = mirror_root / "bench" / "tgz" / "v1"
    tgz_dir.mkdir(parents=True)
    out["tar.gz"] = tgz_dir / "bigtool-v1-linux-x64.tar.gz"
    # system tar and gzip (level 6), as release pipelines make them
    subprocess.run(["tar", "-czf", str(out["tar.gz"]), "-C", str(work), top.name], check=True)
    zip_dir = mirror_root / "bench" / "zip" / "v1"
    zip_dir.mkdir(parents=True)
    out["zip"] = zip_dir / "bigtool-v1-linux-x64.zip"
    _zip_tree(top, out["zip"])
    shutil.rmtree(work)
    return out


def _zip_tree(top: Path, dest: Path) -> None:
    """A zip with unix modes and symlinks stored as links (what ``zip -y`` writes)."""
    with zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED, compresslevel=6) as zf:
        for path in sorted(top.rglob("*")):
            arc = path.relative_to(top.parent).as_posix()
            if path.is_symlink():
                info = zipfile.ZipInfo(arc)
                info.external_attr = (0o120777 << 16) | 0
                zf.writestr(info, os.readlink(path))
            elif path.is_file():
                zf.write(path, arc)


def write_manifest(folder: Path, component: str, repo: str, pattern: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{component}.yaml").write_text(
        f"id: {component}\nkind: custom\nsource: {{type: github, repo: {repo}}}\n"
        f"exe: {{default: {component}}}\n"
        f"variants: [{{id: cpu, assets: {{linux-x64: ['{pattern}'], "
        f"linux-arm64: ['{pattern}']}}}}]\n"
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class MirrorProcess:
    """``backendmgr.mirror`` in its own process: both sides download from it, and its work
    does not share a GIL with this script."""

    def __init__(self, root: Path) -> None:
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen(
            [PY, "-m", "backendmgr.mirror", str(root), "--port", str(self.port)],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd=ROOT,
        )
        assert self.proc.stdout is not None
        self.proc.stdout.readline()  # "serving ..." once it listens

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait()


def library_like(size: int, seed: int) -> bytes:
    """Bytes that deflate like shared libraries (about 2.5:1): instruction-like runs from a
    small pool of snippets, symbol names, some noise and zero padding, in a 16 MiB tile."""
    rnd = random.Random(seed)
    snippets = [rnd.randbytes(rnd.randint(4, 24)) for _ in range(400)]
    letters = b"abcdefghijklmnopqrstuvwxyz_"
    words = [bytes(rnd.choices(letters, k=rnd.randint(3, 14))) for _ in range(1500)]
    tile = bytearray()
    while len(tile) < min(size, 16 << 20):
        r, n = rnd.random(), rnd.randint(256, 4096)
        if r < 0.12:
            tile += rnd.randbytes(n)
        elif r < 0.7:
            piece = bytearray()
            while len(piece) < n:
                piece += rnd.choice(snippets)
            tile += piece
        elif r < 0.9:
            tile += b"\0".join(rnd.choices(words, k=n // 8))
        else:
            tile += bytes(rnd.randint(64, 2048))
    return (bytes(tile) * (size // len(tile) + 1))[:size]


def _tar_gz(top: Path, dest: Path, members: list[str]) -> Path:
    """System tar and gzip (level 6), as release pipelines make them, members in this order."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    names = [f"{top.name}/{m}" for m in members]
    subprocess.run(["tar", "-czf", str(dest), "-C", str(top.parent), *names], check=True)
    shutil.rmtree(top)
    return dest


def _exe(top: Path) -> None:
    top.mkdir(parents=True)
    (top / "bigtool").write_text("#!/bin/sh\necho bench 1.0\n")
    (top / "bigtool").chmod(0o755)


def make_bound_asset(mirror_root: Path, size: int) -> Path:
    """A decompression-bound release: a few large library-like files, ``size`` bytes in all."""
    top = mirror_root.parent / "bound" / "bigtool-v1"
    _exe(top)
    data = library_like(size // 4, 11)
    for n in range(4):  # each file its own rotation of the data
        at = (n * len(data)) // 4
        (top / f"libcuda{n}.so").write_bytes(data[at:] + data[:at])
    dest = mirror_root / "bench" / "bound" / "v1" / "bigtool-v1-linux-x64.tar.gz"
    return _tar_gz(top, dest, ["bigtool", *(f"libcuda{n}.so" for n in range(4))])


def make_zeros_asset(mirror_root: Path, size: int) -> Path:
    """``size`` bytes of zeros after 1/128 of that in noise, which keeps the whole under 200:1
    (a real release with a zero-filled file would carry its libraries first)."""
    top = mirror_root.parent / "zeros" / "bigtool-v1"
    _exe(top)
    (top / "libnoise.so").write_bytes(random.Random(5).randbytes(max(size >> 7, 1 << 20)))
    with (top / "zeros.bin").open("wb") as fh:
        fh.truncate(size)  # sparse on disk: tar reads zeros all the same (no -S)
    dest = mirror_root / "bench" / "zeros" / "v1" / "bigtool-v1-linux-x64.tar.gz"
    return _tar_gz(top, dest, ["bigtool", "libnoise.so", "zeros.bin"])


def make_entries_asset(mirror_root: Path) -> Path:
    """100 001 empty files in a 0.7 MB .tar.gz: refused for the count (limit 100 000)."""
    from tests.support import empty_files_tar_gz

    dest = mirror_root / "bench" / "entries" / "v1" / "bigtool-v1-linux-x64.tar.gz"
    dest.parent.mkdir(parents=True)
    dest.write_bytes(empty_files_tar_gz(100_001, top="bigtool-v1"))
    return dest


def as_installed() -> dict[str, str]:
    """This environment, with byte-code cached as in any install: a session that sets
    PYTHONDONTWRITEBYTECODE would otherwise compile every module of ours at every start
    (2-3 s on this machine), and the reference none."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def make_bomb_asset(mirror_root: Path) -> Path:
    """A split bomb: 8 members of 1.25 GB of zeros in one 10 MB gzip stream, each under 200:1
    of the whole, refused as it unfolds (the ratio so far)."""
    from tests.support import zeros_bomb_tar_gz

    dest = mirror_root / "bench" / "bomb" / "v1" / "bigtool-v1-linux-x64.tar.gz"
    dest.parent.mkdir(parents=True)
    dest.write_bytes(zeros_bomb_tar_gz(8, 1250 << 20, top="bigtool-v1"))
    return dest


def install_once(
    tmp: Path,
    mirror: MirrorProcess,
    repo: str,
    pattern: str,
    *,
    expect: int = 0,
    says: str = "",
    stages: list[dict[str, float]] | None = None,
) -> Sample:
    """``backendmgr install`` of ``repo``'s asset in a fresh home, as a user runs it; with
    ``stages``, the install's stage times (install/stages.py) are appended to it, with its
    wall time."""
    work = Path(tempfile.mkdtemp(dir=tmp))
    write_manifest(work / "manifests", "bigtool", repo, pattern)
    env = {
        **as_installed(),
        "BACKENDMGR_CONFIG": str(work / "config.yaml"),
        "BACKENDMGR_HOME": str(work / "home"),
        "BACKENDMGR_GITHUB_API": mirror.base_url,
        "BACKENDMGR_GPU": "none",
    }
    env.pop("BACKENDMGR_OFFLINE", None)
    if stages is not None:
        env["BACKENDMGR_STAGE_TIMES"] = str(work / "stages.json")
    argv = [PY, "-m", "backendmgr", "-q", "install", "bigtool", "--no-generate"]
    try:
        started = time.time()
        sample = run_measured(argv, env, expect=expect, says=says)
        if stages is not None:
            split = json.loads((work / "stages.json").read_text())
            split["start"] = split.pop("began_at") - started
            split["after"] = sample[0] - (split.pop("saved_at") - started)
            stages.append({"wall": sample[0], **split})
        return sample
    finally:
        shutil.rmtree(work)


# What each stage of an install is called in the table, in the order an install runs them
STAGE_NAMES = {
    "start": "start-up, imports, manifests, release listing",
    "download": "download",
    "hash": "of which hashing",
    "unpack": "unpack (overlapping the download)",
    "unpack_cpu": "of which the unpacking thread's CPU (the rest: waiting for a core or the GIL)",
    "unpack_wait": "of which waiting for data",
    "inflate": "of which inflating",
    "tar_headers": "of which tar headers",
    "write": "file writes, in their own thread (overlapping the unpack)",
    "write_cpu": "of which the writing thread's CPU",
    "write_backlog": "the unpacking thread waiting for the writes to catch up",
    "flush": "the disk's cache flushed early, in a thread of its own (overlapping the unpack)",
    "flush_wait": "waiting for the last early flush",
    "unpack_after_download": "unpack after the download ended",
    "zip_finish": "zip: central directory check, modes, links, members past 2048",
    "extract": "unpack again from the whole file",
    "smoke": "smoke check and probe",
    "commit": "syncfs, receipt and commit",
    "syncfs": "of which syncfs (the disk writing what is not on it yet)",
    "after": "after the commit (registry, config, exit)",
}


def stage_split(samples: list[dict[str, float]]) -> dict[str, dict[str, float]]:
    """Each stage's median seconds and its share of the install's wall time; what precedes
    the archive install (the interpreter, imports, the release listing) is "start"."""
    wall = statistics.median(s["wall"] for s in samples)
    out = {}
    for key in STAGE_NAMES:
        values = [s.get(key, 0.0) for s in samples]
        if any(values):
            median = statistics.median(values)
            out[key] = {"seconds": median, "share": median / wall}
    return out


def inflate_alone(asset: Path, runs: int) -> float:
    """Median seconds to inflate ``asset`` (a ``.tar.gz``) in bounded pieces with the install's
    own inflater (ISA-L where it ships), in one thread with nothing else running: the unpack's
    floor on this machine, which no overlap of download, hashing and writing can beat."""
    from backendmgr.install.inflate import Unpacked

    times = []
    for _ in range(runs):
        with asset.open("rb") as fh:
            started = time.perf_counter()
            for _ in Unpacked(fh).views(1 << 62):
                pass
            times.append(time.perf_counter() - started)
    return statistics.median(times)


def floor_of(stages: dict[str, dict[str, float]], inflate: float, ref: float) -> dict[str, float]:
    """What this design could reach here at best: its start-up, the inflate alone, the commit
    and what follows it, end to end with nothing overlapping; and that against the reference."""
    fixed = sum(stages.get(k, {}).get("seconds", 0.0) for k in ("start", "commit", "after"))
    return {"seconds": fixed + inflate, "inflate_alone": inflate, "ratio": (fixed + inflate) / ref}


def reference_once(tmp: Path, script: str) -> Sample:
    work = Path(tempfile.mkdtemp(dir=tmp))
    try:
        return run_measured(["bash", "-c", script, "bench", str(work)])
    finally:
        shutil.rmtree(work)


def bench_install(
    tmp: Path, size: int, runs: int, cases: set[str], quick: bool = False
) -> list[dict[str, Any]]:
    """``install``: the realistic mix (.tar.gz, .zip); ``bound``: decompression-bound;
    ``zeros``: 1 GiB of zeros vs the realistic one; ``entries``: 100 001 empty files."""
    rows: list[dict[str, Any]] = []
    mirror_root = tmp / "mirror"
    mirror_root.mkdir()
    started = time.perf_counter()
    assets: dict[str, Path] = {}
    if cases & {"install", "zeros"}:
        assets.update(make_assets(mirror_root, size))
    if "bound" in cases:
        assets["bound"] = make_bound_asset(mirror_root, size)
    if "zeros" in cases:
        assets["zeros"] = make_zeros_asset(mirror_root, min(size, 1 << 30))
    if "entries" in cases:
        assets["entries"] = make_entries_asset(mirror_root)
        assets["bomb"] = make_bomb_asset(mirror_root)
    print(f"bench: assets built in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    repos = {"tar.gz": "bench/tgz", "zip": "bench/zip"}
    mirror = MirrorProcess(mirror_root)
    peaks: list[int] = []

    def ours(kind: str, stages: list[dict[str, float]] | None = None) -> Callable[[], Sample]:
        pattern = r"bigtool-.*\.zip" if kind == "zip" else r"bigtool-.*\.tar\.gz"
        repo = repos.get(kind, f"bench/{kind}")
        return lambda: install_once(tmp, mirror, repo, pattern, stages=stages)

    try:
        compared = [k for k in ("tar.gz", "zip") if "install" in cases] + (
            ["bound"] if "bound" in cases else []
        )
        for kind in compared:
            asset = assets[kind]
            url = f"{mirror.base_url}/download/{asset.relative_to(mirror_root).as_posix()}"
            what = "decompression-bound " if kind == "bound" else ""
            ext = "zip" if kind == "zip" else "tar.gz"
            name = f"install {asset.stat().st_size / (1 << 20):.0f} MiB {what}.{ext}"
            need = "unzip" if kind == "zip" else "tar"
            missing = [t for t in ("curl", "openssl", "bash", need) if shutil.which(t) is None]
            if missing:
                rows.append(skipped(name, f"reference tool missing: {', '.join(missing)}"))
                continue
            unpack = "unzip -q a -d x" if kind == "zip" else "tar -xzf a -C x"
            script = (
                'set -euo pipefail; cd "$1"; mkdir x; '
                f"curl -sf {shlex.quote(url)} | tee a | openssl dgst -sha256 >/dev/null; {unpack}"
            )
            # warm: the mirror hashes the asset once, the page cache holds it, byte-code is cached
            reference_once(tmp, script)
            ours(kind)()
            split: list[dict[str, float]] = []
            mine, ref = interleaved(
                ours(kind, split), lambda s=script: reference_once(tmp, s), runs
            )
            peaks += [p for _, p in mine]
            tools = "curl | tee | openssl dgst -sha256; " + unpack.split()[0]
            limit = {"tar.gz": 0.7, "zip": 0.7, "bound": 0.5}[kind]
            rows.append(
                row(
                    f"{name} (vs {tools})",
                    mine,
                    ref,
                    f"<= {limit}",
                    lambda r, lim=limit: r <= lim,
                )
            )
            rows[-1]["stages"] = stage_split(split)
            if kind != "zip":
                alone = inflate_alone(asset, runs)
                rows[-1]["floor"] = floor_of(rows[-1]["stages"], alone, rows[-1]["ref"]["median"])
        if "zeros" in cases:
            ours("zeros")()  # warm
            mine, ref = interleaved(ours("zeros"), ours("tar.gz"), runs)
            peaks += [p for _, p in mine]
            name = (
                f"install {min(size, 1 << 30) >> 20} MiB of zeros in a "
                f"{assets['zeros'].stat().st_size / (1 << 20):.0f} MiB .tar.gz "
                "(vs the realistic .tar.gz)"
            )
            rows.append(row(name, mine, ref, "<= 1.0, peak < 100 MiB", lambda r: r <= 1.0))
            zeros_peak = max(p for _, p in mine) / 1024
            rows.append(
                row(
                    "install of zeros peak RSS, MiB",
                    [(zeros_peak, 0)],
                    None,
                    "< 100 MiB",
                    lambda v: v < 100,
                )
            )
        if "entries" in cases:
            refusal = lambda: install_once(  # noqa: E731
                tmp,
                mirror,
                "bench/entries",
                r"bigtool-.*\.tar\.gz",
                expect=1,
                says="more than 100000 entries",
            )
            mine = [refusal() for _ in range(1 if quick else runs)]  # 100 001 even when quick
            name = "100 001-entry .tar.gz (0.7 MB) refused, seconds"
            rows.append(row(name, mine, None, "<= 5 s", lambda v: v <= 5))
            bomb = lambda: install_once(  # noqa: E731
                tmp,
                mirror,
                "bench/bomb",
                r"bigtool-.*\.tar\.gz",
                expect=1,
                says="together expand more than 200:1",
            )
            mine = [bomb() for _ in range(1 if quick else runs)]
            size_mb = assets["bomb"].stat().st_size / 1e6
            name = f"split bomb .tar.gz ({size_mb:.0f} MB, 8 x 1.25 GB of zeros) refused, seconds"
            rows.append(row(name, mine, None, "<= 2 s", lambda v: v <= 2))
            rows[-1]["peak_rss_mib"] = max(p for _, p in mine) / 1024
    finally:
        mirror.stop()
    if peaks:
        peak = max(peaks) / 1024
        rows.append(
            row(
                "install peak RSS, MiB",
                [(peak, 0)],
                None,
                "< 100 MiB",
                lambda v: v < 100,
            )
        )
    return rows


class CappedHandler(MirrorHandler):
    """Throttled per connection (the mirror's own) and, across connections, by one shared
    token bucket: several downloads share the link instead of each getting its own."""

    def stream_file(
        self, path: Path, start: int, stop: int, *, cut_after: int | None = None
    ) -> None:
        server = self.server
        cap: int | None = getattr(server, "overall", None)
        if not cap:
            super().stream_file(path, start, stop, cut_after=cut_after)
            return
        lock: threading.Lock = server.cap_lock  # type: ignore[attr-defined]
        per = server.throttle
        began = time.monotonic()
        sent = 0
        with path.open("rb") as fh:
            fh.seek(start)
            remaining = stop - start
            while remaining > 0:
                chunk = fh.read(min(1 << 16, remaining))
                if not chunk:
                    break
                with lock:  # reserve this chunk's slot on the shared link
                    now = time.monotonic()
                    slot = max(now, server.cap_next)  # type: ignore[attr-defined]
                    server.cap_next = slot + len(chunk) / cap  # type: ignore[attr-defined]
                if slot > now:
                    time.sleep(slot - now)
                self.wfile.write(chunk)
                sent += len(chunk)
                remaining -= len(chunk)
                if per:
                    ahead = sent / per - (time.monotonic() - began)
                    if ahead > 0:
                        time.sleep(ahead)


def _make_capped(root: Path, per: int | None, overall: int | None) -> MirrorServer:
    server = MirrorServer(root, throttle=per)
    server.RequestHandlerClass = CappedHandler
    server.overall = overall  # type: ignore[attr-defined]
    server.cap_lock = threading.Lock()  # type: ignore[attr-defined]
    server.cap_next = 0.0  # type: ignore[attr-defined]
    return server.start()


def bench_concurrent(
    tmp: Path, size: int, runs: int, per: int, overall: int
) -> list[dict[str, Any]]:
    from backendmgr.config.paths import Paths
    from backendmgr.manager import Manager
    from backendmgr.requests import InstallRequest

    mirror_root = tmp / "mirror3"
    names = ["alpha", "beta", "gamma"]
    blocks = _blocks(3)
    for name in names:
        folder = mirror_root / "bench" / name / "v1"
        folder.mkdir(parents=True)
        work = tmp / f"c-{name}"
        (work / name).mkdir(parents=True)
        (work / name / name).write_text("#!/bin/sh\necho bench 1.0\n")
        (work / name / name).chmod(0o755)
        with (work / name / "lib.so").open("wb") as fh:
            for i in range(max(1, size >> 20)):
                fh.write(blocks[i % len(blocks)])
        with tarfile.open(folder / f"{name}-v1.tar.gz", "w:gz", compresslevel=1) as tf:
            tf.add(work / name, arcname=name)
        shutil.rmtree(work)
    out = []
    for label, p, o in (
        (f"{per >> 20} MiB/s per connection, {overall >> 20} MiB/s in all", per, overall),
        ("no throttle", None, None),
    ):
        server = _make_capped(mirror_root, p, o)
        try:

            def manager(work: Path, server: MirrorServer = server) -> Manager:
                for name in names:
                    write_manifest(work / "manifests", name, f"bench/{name}", f"{name}-.*")
                env = {
                    **os.environ,
                    "BACKENDMGR_GITHUB_API": server.base_url,
                    "BACKENDMGR_GPU": "none",
                }
                env.pop("BACKENDMGR_OFFLINE", None)
                return Manager(
                    Paths.resolve(config=work / "config.yaml", home=work / "home"), environ=env
                )

            async def parallel() -> None:
                mgr = manager(Path(tempfile.mkdtemp(dir=tmp)))
                await asyncio.gather(
                    *(mgr.install(InstallRequest(component=n, generate=False)) for n in names)
                )

            async def sequential() -> None:
                mgr = manager(Path(tempfile.mkdtemp(dir=tmp)))
                for n in names:
                    await mgr.install(InstallRequest(component=n, generate=False))

            par, seq = interleaved(
                lambda: timed(lambda: asyncio.run(parallel())),
                lambda: timed(lambda: asyncio.run(sequential())),
                runs,
            )
        finally:
            server.stop()
        if p and o:
            # the best overlapping can do: the shared cap, or all three at their own limit
            ideal = max(p / o, 1 / len(names))
            limit = round(ideal * 1.15, 2)
            goal, met = f"<= {limit} (ideal {ideal:.2f})", (lambda r, lim=limit: r <= lim)
        else:
            goal, met = "<= 1.0", (lambda r: r <= 1.0)
        name = f"3 installs of {size >> 20} MiB at once vs in turn, {label}"
        out.append(row(name, par, seq, goal, met))
    return out


# ---------------------------------------------------------------------------------------------
# GGUF headers and generate


def realistic_gguf(path: Path, vocab: int) -> None:
    """A header like a real model's: a ``vocab``-token list, types, merges, a chat template."""
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


def gguf_set(tmp: Path, files: int, vocab: int) -> Path:
    folder = tmp / "ggufs"
    folder.mkdir()
    realistic_gguf(folder / "m0000.gguf", vocab)
    for i in range(1, files):
        shutil.copyfile(folder / "m0000.gguf", folder / f"m{i:04d}.gguf")
    return folder


def bench_gguf(folder: Path, runs: int, ref_files: int, vocab: int) -> list[dict[str, Any]]:
    from gguf import GGUFReader

    from backendmgr.discovery.gguf import read_gguf_metadata

    paths = sorted(folder.glob("*.gguf"))
    per = 1 / len(paths)
    ours, ref = interleaved(
        lambda: timed(lambda: [read_gguf_metadata(p) for p in paths]),
        lambda: timed(lambda: [GGUFReader(p) for p in paths[:ref_files]]),
        runs,
    )
    # per file: ours read every file, the reference (slow) a few of them
    ref = [(w * len(paths) / ref_files, 0) for w, _ in ref]
    return [
        row(
            f"GGUF header cold, {vocab}-token vocab, per file (vs GGUFReader)",
            ours,
            ref,
            "<= 0.05 (20x)",
            lambda r: r <= 0.05,
            scale=per,
        )
    ]


def bench_generate(
    tmp: Path, folder: Path, runs: int
) -> tuple[list[dict[str, Any]], dict[str, str]]:
    files = len(list(folder.glob("*.gguf")))
    config = tmp / "gen" / "config.yaml"
    config.parent.mkdir()
    manual = {"id": "bench-llama", "kind": "llama", "path": shutil.which("true") or "/bin/true"}
    config.write_text(
        f"models_dirs: [{json.dumps(str(folder))}]\nbackends: [{json.dumps(manual)}]\n"
    )
    home = tmp / "genh"
    env = {
        **os.environ,
        "BACKENDMGR_CONFIG": str(config),
        "BACKENDMGR_HOME": str(home),
        "BACKENDMGR_VRAM_GB": "24",
        "BACKENDMGR_GPU": "none",
    }
    argv = [PY, "-m", "backendmgr", "-q", "generate", "--force"]

    def cold() -> Sample:
        for cache in home.rglob("*.json"):
            if "cache" in cache.name or "gguf" in cache.name:
                cache.unlink()
        shutil.rmtree(home / "cache", ignore_errors=True)
        return run_measured(argv, env)

    run_measured(argv, env)  # the page cache holds the files for both
    cold_s, warm_s = interleaved(cold, lambda: run_measured(argv, env), runs)
    rows = [
        row(
            f"generate {files} models cold (no discovery cache), per file",
            cold_s,
            None,
            "-",
            None,
            scale=1 / files,
        ),
        row(
            f"generate {files} models warm, whole run",
            warm_s,
            None,
            "< 0.5 s",
            lambda v: v < 0.5,
        ),
    ]
    rows[0]["peak_rss_mib"] = max(p for _, p in cold_s) / 1024
    rows[1]["peak_rss_mib"] = max(p for _, p in warm_s) / 1024
    rows[1]["per_file_s"] = rows[1]["ours"]["median"] / files
    return rows, env


def bench_startup(runs: int, models_env: dict[str, str]) -> list[dict[str, Any]]:
    """Each command as a user runs it, against ``python -c pass`` in the same run (issue 30).

    Every read computes its answer live (nothing replays an output): ``list``, ``backends``,
    ``which`` and ``models`` on the 200-model home; ``set`` and ``pin`` change the config on
    every run (alternating values) and regenerate the 200-model file; ``generate --force``
    writes it; ``--help`` and <TAB> build only the parser they need."""
    base = [PY, "-c", "pass"]
    me = [PY, "-m", "backendmgr"]
    flip = {"set": 0, "pin": 0}

    def changing(kind: str) -> list[str]:
        """A change on every run: ctx 4096/4097, pin/unpin."""
        flip[kind] += 1
        odd = flip[kind] % 2
        if kind == "set":
            return ["set", "m0001", f"ctx={4096 + odd}"]
        return ["pin", "m0002", "bench-llama"] if odd else ["unpin", "m0002"]

    cases: list[tuple[str, Callable[[], list[str]], float, dict[str, str] | None]] = [
        ("--help", lambda: ["--help"], 2.5, None),
        ("ins<TAB>", lambda: ["__complete", "--", "ins"], 2.5, None),  # a command name
        ("install <TAB>", lambda: ["__complete", "--", "install", ""], 2.5, None),  # manifests
        ("pin <TAB>", lambda: ["__complete", "--", "pin", ""], 5, models_env),  # model ids
        ("list", lambda: ["list"], 5, models_env),
        ("backends", lambda: ["backends"], 5, models_env),
        ("which m0001", lambda: ["which", "m0001"], 5, models_env),
        ("models", lambda: ["models"], 8, models_env),
        ("set m0001 ctx=N", lambda: changing("set"), 12, models_env),
        ("pin/unpin m0002", lambda: changing("pin"), 12, models_env),
        ("generate --force", lambda: ["-q", "generate", "--force"], 12, models_env),
    ]
    out = []
    for name, words, limit, env in cases:
        # as installed: byte-code is cached (:func:`as_installed`)
        environ = {
            k: v for k, v in (env or as_installed()).items() if k != "PYTHONDONTWRITEBYTECODE"
        }
        ours, ref = interleaved(
            lambda words=words, environ=environ: run_measured([*me, *words()], environ),
            lambda: run_measured(base),
            runs,
        )
        out.append(
            row(
                f"backendmgr {name} (vs python -c pass)",
                ours,
                ref,
                f"<= {limit:g}",
                lambda r, limit=limit: r <= limit,
            )
        )
    return out


# ---------------------------------------------------------------------------------------------


def _fmt(r: dict[str, Any], side: str) -> str:
    if side not in r:
        return "-"
    s = r[side]
    mib = r["name"].endswith("MiB")
    if mib:
        return f"{s['median']:.1f}"
    if s["median"] < 0.01:
        f = 1e6
        unit = "us"
    else:
        f = 1000.0
        unit = "ms"
    return f"{s['median'] * f:.0f} [{s['min'] * f:.0f}-{s['max'] * f:.0f}] {unit}"


def print_table(info: dict[str, Any], rows: list[dict[str, Any]]) -> None:
    print(
        f"machine: {info['cpu']}, {info['cores']} cores, {info['memory_mib']} MiB, {info['os']}, "
        f"Python {info['python']}, load {info['load_1min']}"
    )
    print(f"{'benchmark (median [min-max])':70} {'ours':>22} {'reference':>22} {'ratio':>6}  goal")
    for r in rows:
        if "skipped" in r:
            print(f"{r['name']:70} skipped: {r['skipped']}")
            continue
        ratio = f"{r['ratio']:.2f}" if r["ratio"] is not None else "-"
        mark = {True: "met", False: "MISSED", None: ""}[r["met"]]
        extra = f" (peak {r['peak_rss_mib']:.0f} MiB)" if "peak_rss_mib" in r else ""
        print(
            f"{r['name']:70} {_fmt(r, 'ours'):>22} {_fmt(r, 'ref'):>22} {ratio:>6}  "
            f"{r['goal']} {mark}{extra}"
        )
        for key, stage in r.get("stages", {}).items():
            print(
                f"    {STAGE_NAMES[key]:66} {stage['seconds'] * 1000:>9.0f} ms "
                f"{stage['share']:>12.0%} of the install"
            )
        if "floor" in r:
            floor = r["floor"]
            print(
                f"    {'inflate alone: one thread, nothing else running':66} "
                f"{floor['inflate_alone'] * 1000:>9.0f} ms"
            )
            print(
                f"    {'the floor: start-up + inflate alone + commit + after':66} "
                f"{floor['seconds'] * 1000:>9.0f} ms {floor['ratio']:>12.2f} of the reference"
            )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small sizes and 2 runs (tests)")
    parser.add_argument("--json", action="store_true", help="one JSON document, every sample")
    parser.add_argument("--runs", type=int, default=None, help="runs per side (default 5)")
    parser.add_argument("--size-mib", type=int, default=None, help="install asset size")
    parser.add_argument(
        "--only",
        default=None,
        help="comma-separated sections to run (default: all; --quick leaves out the size cases "
        "bound, zeros, entries, which bench_install describes)",
    )
    args = parser.parse_args()
    q = args.quick
    runs = args.runs or (2 if q else 5)
    every = "startup,gguf,generate,concurrent,install" + ("" if q else ",bound,zeros,entries")
    only = set((args.only or every).split(","))
    missing = missing_tools()
    if missing:
        print(
            f"bench: reference tool(s) missing: {', '.join(missing)}; the cases that need them "
            "are skipped (install them, e.g. apt-get install curl openssl unzip)",
            file=sys.stderr,
        )
    info = machine()
    rows: list[dict[str, Any]] = []
    began = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="backendmgr-bench-") as name:
        tmp = Path(name)
        os.environ["BACKENDMGR_HOME"] = str(tmp / "home-startup")
        os.environ["BACKENDMGR_CONFIG"] = str(tmp / "cfg-startup" / "config.yaml")
        vocab = 2000 if q else 150_000
        gen_rows: list[dict[str, Any]] = []
        models_env: dict[str, str] = dict(os.environ)
        if only & {"startup", "gguf", "generate"}:
            folder = gguf_set(tmp, 5 if q else 200, vocab)
            gen_rows, models_env = bench_generate(tmp, folder, runs)
        if "startup" in only:
            rows += bench_startup(3 if q else max(runs, 10), models_env)
        if "gguf" in only:
            rows += bench_gguf(folder, runs, 1, vocab)  # GGUFReader takes seconds a file
        if "generate" in only:
            rows += gen_rows
        if "concurrent" in only:
            rows += bench_concurrent(
                tmp, (1 if q else 16) << 20, runs, (4 if q else 16) << 20, (8 if q else 32) << 20
            )
        cases = only & {"install", "bound", "zeros", "entries"}
        if cases:
            # the unpacked tree; gzip and deflate make a ~1 GiB (~7 MiB quick) asset of it
            size = (args.size_mib or (8 if q else 1170)) << 20
            rows += bench_install(tmp, size, runs, cases, q)
    info["bench_seconds"] = round(time.perf_counter() - began, 1)
    if args.json:
        print(json.dumps({"machine": info, "rows": rows}, indent=2))
    else:
        print_table(info, rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
