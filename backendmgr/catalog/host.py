"""What machine this is: OS, CPU architecture, GPU adapters and NVIDIA driver (SPEC §5).

Detection never raises. Every probe that fails becomes a reason line, so ``catalog`` can say
why it suggested what it did. Probes are parameters, so tests describe a host as data.

Each adapter carries its index among the adapters of its vendor, which is the number that
vendor's runtime gives it (``CUDA_VISIBLE_DEVICES``, ``HIP_VISIBLE_DEVICES`` count only their
own cards), and its memory where a probe reports it: a device pin is sized for that card.
"""

from __future__ import annotations

import contextlib
import os
import platform as _platform
import re
import shutil
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import field
from pathlib import Path
from typing import Literal

from ..immutable import frozen

__all__ = [
    "Adapter",
    "Host",
    "detect_host",
    "needed_vendor",
    "parse_gpu_override",
    "parse_platform",
    "vendor_of",
]

Vendor = Literal["nvidia", "amd", "intel", "apple", "other"]
_OS = {"linux": "linux", "windows": "windows", "darwin": "darwin"}
_ARCH = {"x86_64": "x64", "amd64": "x64", "x64": "x64", "aarch64": "arm64", "arm64": "arm64"}
_PCI_VENDORS: dict[str, Vendor] = {"0x10de": "nvidia", "0x1002": "amd", "0x8086": "intel"}


_VARIANT_NEEDS: dict[str, tuple[Vendor, str]] = {
    "cuda": ("nvidia", "NVIDIA"),
    "rocm": ("amd", "AMD"),
    "hip": ("amd", "AMD"),
    "metal": ("apple", "Apple"),
    "sycl": ("intel", "Intel"),
}


def needed_vendor(variant: str) -> tuple[Vendor, str] | None:
    """The GPU vendor a variant's name says it needs (``cuda``, ``cuda-12.8`` → NVIDIA), with
    the name a message uses; None for a variant any host runs (cpu, vulkan)."""
    head = re.split(r"[-_.\d]", variant.strip().lower(), maxsplit=1)[0]
    return _VARIANT_NEEDS.get(head)


MAX_ADAPTERS = 64  # more than any one machine holds; bounds a hostile override or probe
MAX_NAME = 120


@frozen(slots=True, repr=True, eq=True)
class Adapter:
    name: str
    vendor: Vendor
    memory_gb: float | None = None
    index: int = 0  # among the adapters of its vendor, as that vendor's runtime counts them

    def line(self) -> str:
        """``GPU 1: NVIDIA GeForce RTX 3060, 12.0 GiB (nvidia)`` for ``catalog``/``doctor``."""
        memory = f", {self.memory_gb:.1f} GiB" if self.memory_gb is not None else ""
        return f"GPU {self.index}: {self.name}{memory} ({self.vendor})"


@frozen(slots=True)
class Host:
    os: str
    arch: str
    adapters: tuple[Adapter, ...] = ()
    nvidia_driver: str | None = None
    reasons: tuple[str, ...] = field(default=())

    @property
    def platform(self) -> str:
        return f"{self.os}-{self.arch}"

    def gpu_lines(self) -> list[str]:
        return [a.line() for a in self.adapters] or ["GPU: none detected"]

    def why_not(self, variant: str) -> str | None:
        """Why this host cannot run a build of ``variant`` (no adapter of the vendor its
        name needs), or None when it can, as far as detection tells."""
        needs = needed_vendor(variant)
        if needs is None or any(a.vendor == needs[0] for a in self.adapters):
            return None
        return f"no {needs[1]} GPU on this host"


def _indexed(adapters: list[Adapter]) -> tuple[Adapter, ...]:
    """Number each adapter among those of its vendor, in the order the probe listed them."""
    seen: dict[str, int] = {}
    out = []
    for a in adapters[:MAX_ADAPTERS]:
        n = seen.get(a.vendor, 0)
        seen[a.vendor] = n + 1
        out.append(Adapter(a.name[:MAX_NAME], a.vendor, a.memory_gb, n))
    return tuple(out)


def _gib(text: str, scale: float = 1.0) -> float | None:
    """A positive finite memory figure, or None for anything else."""
    try:
        value = float(text) * scale
    except ValueError:
        return None
    return value if 0 < value < 1 << 20 else None


def parse_gpu_override(text: str) -> list[Adapter]:
    """``BACKENDMGR_GPU``: adapter names separated by ``;``, each optionally followed by
    ``:GIB``, its memory (``NVIDIA RTX 4090:24;NVIDIA RTX 3060:12``). A name without a number
    after its last ``:`` is kept whole, so the older syntax reads as before."""
    adapters = []
    for part in text.split(";"):
        name, sep, tail = part.strip().rpartition(":")
        memory = _gib(tail.strip()) if sep else None
        if memory is None or not name.strip():
            name, memory = part.strip(), None
        if name.strip():
            adapters.append(Adapter(name.strip(), vendor_of(name), memory))
    return adapters


def vendor_of(name: str) -> Vendor:
    lowered = name.lower()
    if any(w in lowered for w in ("nvidia", "geforce", "quadro", "tesla", "rtx")):
        return "nvidia"
    if any(w in lowered for w in ("amd", "radeon", "instinct")):
        return "amd"
    if any(w in lowered for w in ("intel", "arc ", "iris")):
        return "intel"
    if "apple" in lowered:
        return "apple"
    return "other"


def parse_platform(text: str) -> tuple[str, str]:
    """``linux-x64`` → ("linux", "x64"); also accepts ``x86_64``/``aarch64`` spellings."""
    os_part, _, arch_part = text.strip().lower().partition("-")
    if os_part not in _OS or arch_part not in _ARCH:
        from ..errors import InvalidInput

        raise InvalidInput(
            f'unknown platform "{text}"; use OS-ARCH with OS linux, windows or darwin and '
            "ARCH x64 or arm64"
        )
    return _OS[os_part], _ARCH[arch_part]


Runner = Callable[[list[str]], str]


def _run(argv: list[str]) -> str:
    if shutil.which(argv[0]) is None:
        raise FileNotFoundError(argv[0])
    done = subprocess.run(argv, capture_output=True, text=True, timeout=10, check=True)
    return done.stdout


def _nvidia_smi(run: Runner, reasons: list[str]) -> tuple[list[Adapter], str | None]:
    try:
        out = run(
            [
                "nvidia-smi",
                "--query-gpu=name,driver_version,memory.total",
                "--format=csv,noheader,nounits",
            ]
        )
    except FileNotFoundError:
        reasons.append("nvidia-smi not found")
        return [], None
    except Exception as exc:
        reasons.append(f"nvidia-smi failed: {type(exc).__name__}")
        return [], None
    adapters: list[Adapter] = []
    driver: str | None = None
    for line in out.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 2 or not parts[0]:
            continue
        memory = _gib(parts[2], 1 / 1024) if len(parts) > 2 else None
        adapters.append(Adapter(parts[0], "nvidia", memory))
        driver = driver or parts[1]
    reasons.append(f"nvidia-smi: {len(adapters)} adapter(s), driver {driver or 'unknown'}")
    return adapters, driver


def _rocm_smi(run: Runner, reasons: list[str]) -> list[Adapter]:
    """AMD cards with their VRAM, from ``rocm-smi --json`` (its keys name each card)."""
    import json

    try:
        out = run(["rocm-smi", "--showproductname", "--showmeminfo", "vram", "--json"])
        data = json.loads(out[: 1 << 20])
    except FileNotFoundError:
        reasons.append("rocm-smi not found")
        return []
    except Exception as exc:
        reasons.append(f"rocm-smi failed: {type(exc).__name__}")
        return []
    adapters: list[Adapter] = []
    cards = data if isinstance(data, dict) else {}
    for key in sorted(k for k in cards if isinstance(k, str) and k.startswith("card")):
        info = cards[key]
        if not isinstance(info, dict):
            continue
        name = str(
            info.get("Card Series") or info.get("Card series") or info.get("Card SKU") or key
        )
        total = info.get("VRAM Total Memory (B)")
        memory = _gib(str(total), 1 / (1 << 30)) if total is not None else None
        adapters.append(Adapter(name, "amd", memory))
    reasons.append(f"rocm-smi: {len(adapters)} adapter(s)")
    return adapters


def _drm(root: Path, reasons: list[str]) -> list[Adapter]:
    adapters: list[Adapter] = []
    try:
        vendors = sorted(root.glob("card*/device/vendor"))
    except OSError:
        vendors = []
    for vendor_file in vendors:
        try:
            code = vendor_file.read_text().strip().lower()
        except OSError:
            continue
        vendor = _PCI_VENDORS.get(code, "other")
        memory = None
        with contextlib.suppress(OSError):  # amdgpu and xe report their VRAM in bytes
            total = (vendor_file.parent / "mem_info_vram_total").read_text()[:64]
            memory = _gib(total.strip(), 1 / (1 << 30))
        name = f"{vendor} ({code}) {vendor_file.parent.parent.name}"
        adapters.append(Adapter(name, vendor, memory))
    reasons.append(
        f"/sys/class/drm: {len(adapters)} adapter(s)" if adapters else "/sys/class/drm: no adapters"
    )
    return adapters


def detect_host(
    environ: Mapping[str, str] | None = None,
    *,
    run: Runner = _run,
    drm_root: Path = Path("/sys/class/drm"),
    system: str | None = None,
    machine: str | None = None,
) -> Host:
    """The host as the installer needs it; ``BACKENDMGR_GPU`` overrides adapter probing."""
    env = os.environ if environ is None else environ
    os_name = _OS.get((system or _platform.system()).lower(), "linux")
    arch = _ARCH.get((machine or _platform.machine()).lower(), "x64")
    reasons: list[str] = []
    adapters: list[Adapter] = []
    driver: str | None = None
    override = env.get("BACKENDMGR_GPU")
    if override is not None:
        if override.strip().lower() in ("none", ""):
            reasons.append("BACKENDMGR_GPU=none")
        else:
            adapters = parse_gpu_override(override)
            reasons.append(f"BACKENDMGR_GPU: {'; '.join(a.name for a in adapters)}")
        return Host(os_name, arch, _indexed(adapters), None, tuple(reasons))
    adapters, driver = _nvidia_smi(run, reasons)
    if not adapters and os_name == "linux":
        adapters = _rocm_smi(run, reasons)
    if not adapters and os_name == "linux":
        adapters = _drm(drm_root, reasons)
    if not adapters and os_name == "darwin":
        try:
            brand = run(["sysctl", "-n", "machdep.cpu.brand_string"]).strip()
            if brand.lower().startswith("apple") or arch == "arm64":
                adapters = [Adapter(brand or "Apple GPU", "apple")]
            reasons.append(f"sysctl: {brand or 'unknown CPU'}")
        except Exception as exc:
            reasons.append(f"sysctl failed: {type(exc).__name__}")
    return Host(os_name, arch, _indexed(adapters), driver, tuple(reasons))
