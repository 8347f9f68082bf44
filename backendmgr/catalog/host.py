"""What machine this is: OS, CPU architecture, GPU adapters and NVIDIA driver (SPEC §5).

Detection never raises. Every probe that fails becomes a reason line, so ``catalog`` can say
why it suggested what it did. Probes are parameters, so tests describe a host as data.
"""

from __future__ import annotations

import os
import platform as _platform
import shutil
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

__all__ = ["Adapter", "Host", "detect_host", "parse_platform", "vendor_of"]

Vendor = Literal["nvidia", "amd", "intel", "apple", "other"]
_OS = {"linux": "linux", "windows": "windows", "darwin": "darwin"}
_ARCH = {"x86_64": "x64", "amd64": "x64", "x64": "x64", "aarch64": "arm64", "arm64": "arm64"}
_PCI_VENDORS: dict[str, Vendor] = {"0x10de": "nvidia", "0x1002": "amd", "0x8086": "intel"}


@dataclass(frozen=True, slots=True)
class Adapter:
    name: str
    vendor: Vendor
    memory_gb: float | None = None


@dataclass(frozen=True, slots=True)
class Host:
    os: str
    arch: str
    adapters: tuple[Adapter, ...] = ()
    nvidia_driver: str | None = None
    reasons: tuple[str, ...] = field(default=())

    @property
    def platform(self) -> str:
        return f"{self.os}-{self.arch}"


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
        memory = None
        if len(parts) > 2:
            try:
                memory = float(parts[2]) / 1024
            except ValueError:
                memory = None
        adapters.append(Adapter(parts[0], "nvidia", memory))
        driver = driver or parts[1]
    reasons.append(f"nvidia-smi: {len(adapters)} adapter(s), driver {driver or 'unknown'}")
    return adapters, driver


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
        adapters.append(Adapter(f"{vendor} ({code}) {vendor_file.parent.parent.name}", vendor))
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
            adapters = [Adapter(n.strip(), vendor_of(n)) for n in override.split(";") if n.strip()]
            reasons.append(f"BACKENDMGR_GPU: {'; '.join(a.name for a in adapters)}")
        return Host(os_name, arch, tuple(adapters), None, tuple(reasons))
    adapters, driver = _nvidia_smi(run, reasons)
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
    return Host(os_name, arch, tuple(adapters), driver, tuple(reasons))
