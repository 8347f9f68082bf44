"""What a server's process group holds: GPU memory where a tool reports it, else resident memory.

``nvidia-smi`` (through :func:`backendmgr.serve_check.gpu_memory_gib`) or ``rocm-smi`` sum the
group's processes on the card; on a host without either, or when neither lists the group (a
model run on the CPU), the group's resident memory from ``/proc`` is the figure, so ``tune``
measures on any Linux host.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

import anyio

__all__ = ["group_memory", "group_rss_gib", "parse_rocm_pids"]

PROC_ENTRIES_CAP = 1 << 16
STATUS_CAP = 8192
GIB = float(1 << 30)


def _pgrp(pid: int, proc: Path) -> int | None:
    """The process group of ``pid`` from /proc/PID/stat (the command name may hold spaces)."""
    try:
        stat = (proc / str(pid) / "stat").read_bytes()[:4096].decode("ascii", "replace")
        return int(stat.rsplit(")", 1)[1].split()[2])
    except (OSError, IndexError, ValueError):
        return None


def _rss_kib(pid: int, proc: Path) -> int:
    try:
        with (proc / str(pid) / "status").open("rb") as fh:
            text = fh.read(STATUS_CAP).decode("ascii", "replace")
    except OSError:
        return 0
    for line in text.splitlines():
        if line.startswith("VmRSS:"):
            parts = line.split()
            return int(parts[1]) if len(parts) >= 2 and parts[1].isdigit() else 0
    return 0


def group_rss_gib(group: int, proc: Path = Path("/proc")) -> float | None:
    """The summed VmRSS of every process in ``group``; None where /proc cannot tell."""
    try:
        names = [n for _, n in zip(range(PROC_ENTRIES_CAP), os.listdir(proc), strict=False)]
    except OSError:
        return None
    total, seen = 0, False
    for name in names:
        if not name.isdigit():
            continue
        pid = int(name)
        if _pgrp(pid, proc) == group:
            total += _rss_kib(pid, proc)
            seen = True
    return round(total * 1024 / GIB, 4) if seen else None


def parse_rocm_pids(text: str, group: int) -> float | None:
    """``rocm-smi --showpids --json``: ``{"system": {"PID123": "name, gpus, vram bytes, …"}}``;
    the GiB of our group's processes, None when none is listed."""
    from ..serve_check import in_group

    try:
        data = json.loads(text)
    except ValueError:
        return None
    system = data.get("system") if isinstance(data, dict) else None
    if not isinstance(system, dict):
        return None
    total, seen = 0, False
    for key, value in list(system.items())[:4096]:
        if not (isinstance(key, str) and key.startswith("PID") and isinstance(value, str)):
            continue
        fields = [f.strip() for f in value.split(",")]
        try:
            pid, used = int(key[3:]), int(fields[2])
        except (ValueError, IndexError):
            continue
        if in_group(pid, group):
            total += used
            seen = True
    return round(total / GIB, 4) if seen else None


async def group_memory(group: int, env: Mapping[str, str]) -> tuple[float, str] | None:
    """(GiB, what measured it) for the process group ``group``."""
    from ..serve_check import gpu_memory_gib, tool_output

    nvidia = await gpu_memory_gib(group, env)
    if nvidia is not None:
        return nvidia, "nvidia-smi"
    text = await tool_output("rocm-smi", ["--showpids", "--json"], env)
    rocm = None if text is None else parse_rocm_pids(text, group)
    if rocm is not None:
        return rocm, "rocm-smi"
    rss = await anyio.to_thread.run_sync(group_rss_gib, group)
    return (rss, "resident memory") if rss is not None else None
