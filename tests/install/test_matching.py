from __future__ import annotations

import pytest

from backendmgr.catalog.host import Adapter, Host
from backendmgr.catalog.manifest import load_catalog
from backendmgr.catalog.matching import (
    cuda_major_for_driver,
    match_release,
    suggest_variant,
    variants_in_release,
)
from backendmgr.errors import NotFound
from backendmgr.sources.models import Release, ReleaseAsset
from tests.support import B11211_ASSETS, OLD_ASSETS

LLAMA = load_catalog().get("llama-server")
assert LLAMA is not None


def release(tag: str, names: list[str]) -> Release:
    return Release(tag=tag, assets=tuple(ReleaseAsset(name=n, url=f"https://x/{n}") for n in names))


B11211 = release("b11211", B11211_ASSETS)
OLD = release("b5000", OLD_ASSETS)


@pytest.mark.parametrize(
    ("platform", "variant", "primary", "extras"),
    [
        ("linux-x64", "cpu", "llama-b11211-bin-ubuntu-x64.tar.gz", []),
        ("linux-x64", "vulkan", "llama-b11211-bin-ubuntu-vulkan-x64.tar.gz", []),
        ("linux-x64", "cuda", "llama-b11211-bin-ubuntu-cuda-13.4-x64.tar.gz", []),
        ("linux-x64", "rocm", "llama-b11211-bin-ubuntu-rocm-10.0-x64.tar.gz", []),
        ("linux-x64", "sycl", "llama-b11211-bin-ubuntu-sycl-fp16-x64.tar.gz", []),
        ("linux-x64", "openvino", "llama-b11211-bin-ubuntu-openvino-2026.4-x64.tar.gz", []),
        ("linux-arm64", "cpu", "llama-b11211-bin-ubuntu-arm64.tar.gz", []),
        ("linux-arm64", "vulkan", "llama-b11211-bin-ubuntu-vulkan-arm64.tar.gz", []),
        ("linux-arm64", "cuda", "llama-b11211-bin-ubuntu-cuda-13.4-arm64.tar.gz", []),
        ("windows-x64", "cpu", "llama-b11211-bin-win-cpu-x64.zip", []),
        (
            "windows-x64",
            "cuda",
            "llama-b11211-bin-win-cuda-13.4-x64.zip",
            ["cudart-llama-bin-win-cuda-13.4-x64.zip"],
        ),
        ("windows-x64", "vulkan", "llama-b11211-bin-win-vulkan-x64.zip", []),
        ("windows-x64", "rocm", "llama-b11211-bin-win-rocm-10.0-x64.zip", []),
        ("windows-x64", "sycl", "llama-b11211-bin-win-sycl-x64.zip", []),
        ("darwin-arm64", "metal", "llama-b11211-bin-macos-arm64.tar.gz", []),
        ("darwin-x64", "metal", "llama-b11211-bin-macos-x64.tar.gz", []),
    ],
)
def test_b11211_names(platform: str, variant: str, primary: str, extras: list[str]) -> None:
    choice = match_release(LLAMA, variant, B11211, platform)
    assert choice.primary.name == primary
    assert [e.name for e in choice.extras] == extras


@pytest.mark.parametrize(
    ("platform", "variant", "primary", "extras"),
    [
        ("linux-x64", "cpu", "llama-b5000-bin-ubuntu-x64.zip", []),
        ("linux-x64", "vulkan", "llama-b5000-bin-ubuntu-vulkan-x64.zip", []),
        ("windows-x64", "rocm", "llama-b5000-bin-win-hip-radeon-x64.zip", []),
        (
            "windows-x64",
            "cuda",
            "llama-b5000-bin-win-cuda-12.4-x64.zip",
            ["cudart-llama-bin-win-cuda-12.4-x64.zip"],
        ),
        ("darwin-arm64", "metal", "llama-b5000-bin-macos-arm64.zip", []),
    ],
)
def test_old_style_names(platform: str, variant: str, primary: str, extras: list[str]) -> None:
    choice = match_release(LLAMA, variant, OLD, platform)
    assert choice.primary.name == primary
    assert [e.name for e in choice.extras] == extras


@pytest.mark.parametrize(
    ("driver", "linux", "windows", "cudart"),
    [
        ("580.65.06", "13.4", "13.4", "13.4"),
        ("575.51.03", "12.8", "12.4", "12.4"),
        ("550.1", "12.8", "12.4", "12.4"),
        (None, "13.4", "13.4", "13.4"),  # unknown driver → the highest toolkit
    ],
)
def test_cuda_toolkit_follows_driver(
    driver: str | None, linux: str, windows: str, cudart: str
) -> None:
    lin = match_release(LLAMA, "cuda", B11211, "linux-x64", cuda_driver=driver)
    assert lin.primary.name == f"llama-b11211-bin-ubuntu-cuda-{linux}-x64.tar.gz"
    win = match_release(LLAMA, "cuda", B11211, "windows-x64", cuda_driver=driver)
    assert win.primary.name == f"llama-b11211-bin-win-cuda-{windows}-x64.zip"
    assert [e.name for e in win.extras] == [f"cudart-llama-bin-win-cuda-{cudart}-x64.zip"]


def test_cudart_of_another_version_is_never_paired() -> None:
    rel = release(
        "b1", ["llama-b1-bin-win-cuda-12.4-x64.zip", "cudart-llama-bin-win-cuda-13.4-x64.zip"]
    )
    with pytest.raises(NotFound, match="companion archive"):
        match_release(LLAMA, "cuda", rel, "windows-x64")


def test_old_driver_with_only_new_toolkit_says_why() -> None:
    rel = release(
        "b1",
        ["llama-b1-bin-ubuntu-cuda-13.4-x64.tar.gz", "llama-b1-bin-ubuntu-cuda-13.1-x64.tar.gz"],
    )
    with pytest.raises(NotFound, match="newer NVIDIA driver than 550"):
        match_release(LLAMA, "cuda", rel, "linux-x64", cuda_driver="550.1")


@pytest.mark.parametrize(
    ("driver", "major"), [("580.1", 13), ("590", 13), ("579.99", 12), ("", None), ("x", None)]
)
def test_cuda_major_for_driver(driver: str, major: int | None) -> None:
    assert cuda_major_for_driver(driver) == major


@pytest.mark.parametrize(
    ("variant", "platform", "message"),
    [
        ("rocm", "linux-arm64", "no rocm build of llama-server is published for linux-arm64"),
        ("metal", "linux-x64", "no metal build of llama-server is published for linux-x64"),
        (
            "tpu",
            "linux-x64",
            r'llama-server has no variant "tpu"; did you mean cpu\? \(known variants: cpu, cuda,',
        ),
    ],
)
def test_unknown_or_unpublished_variant(variant: str, platform: str, message: str) -> None:
    with pytest.raises(NotFound, match=message):
        match_release(LLAMA, variant, B11211, platform)


def test_release_without_the_variant_lists_what_it_ships() -> None:
    rel = release(
        "b9000", ["llama-b9000-bin-ubuntu-x64.tar.gz", "llama-b9000-bin-ubuntu-vulkan-x64.tar.gz"]
    )
    with pytest.raises(NotFound) as info:
        match_release(LLAMA, "rocm", rel, "linux-x64")
    assert str(info.value) == (
        "release b9000 has no rocm asset for linux-x64; it ships cpu, vulkan"
    )
    assert variants_in_release(LLAMA, B11211, "linux-x64") == [
        "cpu",
        "cuda",
        "vulkan",
        "rocm",
        "sycl",
        "openvino",
    ]


def test_sd_server_matches_case_insensitively() -> None:
    sd = load_catalog().get("sd-server")
    assert sd is not None
    rel = release(
        "master-abc",
        [
            "sd-master-abc1234-bin-Linux-Ubuntu-24.04-x86_64-vulkan.zip",
            "sd-master-abc1234-bin-Linux-Ubuntu-24.04-x86_64.zip",
        ],
    )
    assert match_release(sd, "vulkan", rel, "linux-x64").primary.name.endswith("vulkan.zip")
    assert match_release(sd, "cpu", rel, "linux-x64").primary.name.endswith("x86_64.zip")


def test_upscaler_any() -> None:
    up = load_catalog().get("upscaler")
    assert up is not None
    rel = release(
        "v0.2.5.0",
        [
            "realesrgan-ncnn-vulkan-20220424-ubuntu.zip",
            "realesrgan-ncnn-vulkan-20220424-windows.zip",
        ],
    )
    assert match_release(up, "any", rel, "linux-x64").primary.name.endswith("ubuntu.zip")


def host(*adapters: Adapter, os: str = "linux", arch: str = "x64") -> Host:
    return Host(os, arch, adapters)


@pytest.mark.parametrize(
    ("h", "component", "variant", "why"),
    [
        (
            host(Adapter("NVIDIA GeForce RTX 4090", "nvidia")),
            "llama-server",
            "cuda",
            "NVIDIA adapter (NVIDIA GeForce RTX 4090)",
        ),
        (host(Adapter("AMD Radeon", "amd")), "llama-server", "vulkan", "AMD adapter (AMD Radeon)"),
        (
            host(Adapter("Intel Arc", "intel")),
            "llama-server",
            "vulkan",
            "INTEL adapter (Intel Arc)",
        ),
        (host(), "llama-server", "cpu", "no GPU adapter found"),
        (
            host(Adapter("Apple M3", "apple"), os="darwin", arch="arm64"),
            "llama-server",
            "metal",
            "Apple GPU",
        ),
        (
            host(Adapter("NVIDIA", "nvidia"), os="windows", arch="arm64"),
            "llama-server",
            "cpu",
            "NVIDIA adapter (NVIDIA), no cuda build for windows-arm64; llama-server has no vulkan "
            "build, so cpu",
        ),
        (
            host(Adapter("NVIDIA", "nvidia")),
            "upscaler",
            "any",
            "NVIDIA adapter (NVIDIA), no cuda build for linux-x64; upscaler has no vulkan build, "
            "so any",
        ),
        (host(Adapter("NVIDIA", "nvidia")), "vllm", "cuda", "NVIDIA adapter (NVIDIA)"),
        (
            host(Adapter("AMD Radeon RX 7900 XTX", "amd")),
            "vllm",
            "rocm",
            "AMD adapter (AMD Radeon RX 7900 XTX); vllm has no vulkan build, so rocm",
        ),
        (
            host(Adapter("Intel Arc", "intel")),
            "vllm",
            "cpu",  # no sycl or openvino vllm: the CPU, never another vendor's cuda
            "INTEL adapter (Intel Arc); vllm has no vulkan build, so cpu",
        ),
    ],
)
def test_suggest_variant(h: Host, component: str, variant: str, why: str) -> None:
    manifest = load_catalog().get(component)
    assert manifest is not None
    assert suggest_variant(manifest, h) == (variant, why)
