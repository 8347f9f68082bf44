from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from backendmgr.catalog.host import detect_host, parse_platform
from backendmgr.errors import InvalidInput


def no_commands(argv: list[str]) -> str:
    raise FileNotFoundError(argv[0])


def drm(tmp_path: Path, *vendors: str) -> Path:
    for i, vendor in enumerate(vendors):
        folder = tmp_path / f"card{i}" / "device"
        folder.mkdir(parents=True)
        (folder / "vendor").write_text(vendor + "\n")
    return tmp_path


def test_env_override_lists_adapters() -> None:
    host = detect_host(
        {"BACKENDMGR_GPU": "NVIDIA GeForce RTX 4090;AMD Radeon Graphics"},
        run=no_commands,
        system="Linux",
        machine="x86_64",
    )
    assert [(a.name, a.vendor) for a in host.adapters] == [
        ("NVIDIA GeForce RTX 4090", "nvidia"),
        ("AMD Radeon Graphics", "amd"),
    ]
    assert host.platform == "linux-x64"


def test_env_none_means_no_adapter() -> None:
    host = detect_host(
        {"BACKENDMGR_GPU": "none"}, run=no_commands, system="Linux", machine="aarch64"
    )
    assert host.adapters == () and host.platform == "linux-arm64"
    assert host.reasons == ("BACKENDMGR_GPU=none",)


def test_nvidia_smi_gives_names_driver_and_memory(tmp_path: Path) -> None:
    def smi(argv: list[str]) -> str:
        assert argv[0] == "nvidia-smi"
        return "NVIDIA GeForce RTX 4090, 580.65.06, 24564\nNVIDIA RTX A4000, 580.65.06, 16376\n"

    host = detect_host({}, run=smi, drm_root=tmp_path, system="Linux", machine="x86_64")
    assert [a.name for a in host.adapters] == ["NVIDIA GeForce RTX 4090", "NVIDIA RTX A4000"]
    assert host.nvidia_driver == "580.65.06"
    assert host.adapters[0].memory_gb == pytest.approx(23.99, abs=0.01)


def test_drm_vendors_when_nvidia_smi_is_missing(tmp_path: Path) -> None:
    host = detect_host(
        {},
        run=no_commands,
        drm_root=drm(tmp_path, "0x1002", "0x8086"),
        system="Linux",
        machine="x86_64",
    )
    assert [a.vendor for a in host.adapters] == ["amd", "intel"]
    assert host.reasons[0] == "nvidia-smi not found"


def test_failing_probes_never_raise(tmp_path: Path) -> None:
    def broken(argv: list[str]) -> str:
        raise subprocess.CalledProcessError(9, argv)

    host = detect_host(
        {}, run=broken, drm_root=tmp_path / "missing", system="Linux", machine="x86_64"
    )
    assert host.adapters == ()
    assert host.reasons == (
        "nvidia-smi failed: CalledProcessError",
        "rocm-smi failed: CalledProcessError",
        "/sys/class/drm: no adapters",
    )


def test_macos_apple_silicon() -> None:
    def sysctl(argv: list[str]) -> str:
        if argv[0] == "sysctl":
            return "Apple M3 Max\n"
        raise FileNotFoundError(argv[0])

    host = detect_host({}, run=sysctl, system="Darwin", machine="arm64")
    assert host.platform == "darwin-arm64" and host.adapters[0].vendor == "apple"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("linux-x64", ("linux", "x64")),
        ("darwin-arm64", ("darwin", "arm64")),
        ("Windows-X64", ("windows", "x64")),
        ("linux-aarch64", ("linux", "arm64")),
    ],
)
def test_parse_platform(text: str, expected: tuple[str, str]) -> None:
    assert parse_platform(text) == expected


def test_parse_platform_rejects_unknown() -> None:
    with pytest.raises(InvalidInput, match="unknown platform"):
        parse_platform("solaris-sparc")
