"""The single-device pin's pure core (issue 24): vendor → variables, the resolved build's
vendor, merging the user's ``env``, the override's validation, the host's GPU list and the
memory a pinned model is sized for."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import pytest

from backendmgr.catalog.capabilities import Capabilities
from backendmgr.catalog.host import Adapter, detect_host, parse_gpu_override
from backendmgr.config.models import BackendRow, ModelOverride, Settings
from backendmgr.discovery.models import DiscoveredModel
from backendmgr.emit.devices import (
    build_vendor,
    device_variables,
    device_warning,
    merge_env,
    plan_devices,
)
from backendmgr.emit.plan import Entry, plan_model
from backendmgr.emit.sizing import LLAMA_FIXED_GB, devices_card_gb, llama_sizing
from backendmgr.record import validate
from backendmgr.registry.resolve import Resolution
from tests.support.metas import BIG as META

TWO_CARDS = "NVIDIA GeForce RTX 4090:24;NVIDIA GeForce RTX 3060:12"


def no_commands(argv: list[str]) -> str:
    raise FileNotFoundError(argv[0])


def gpus(text: str = TWO_CARDS) -> tuple[Adapter, ...]:
    return detect_host({"BACKENDMGR_GPU": text}, run=no_commands, system="Linux").adapters


def managed(variant: str, kind: str = "llama", component: str = "llama-server") -> Resolution:
    row = BackendRow(
        id=f"{component}@b1-{variant}",
        kind=kind,
        path=f"/b/{variant}/exe",
        managed=True,
        build=True,
        component=component,
        version="b1",
        variant=variant,
    )
    return Resolution(cls="llm", row=row, reason="pinned", exe=row.path)


def manual() -> Resolution:
    row = BackendRow(id="mine", kind="llama", path="/opt/llama-server")
    return Resolution(cls="llm", row=row, reason="default", exe=row.path)


@pytest.mark.parametrize(
    ("vendor", "devices", "words"),
    [
        ("cuda", (1,), ["CUDA_DEVICE_ORDER=PCI_BUS_ID", "CUDA_VISIBLE_DEVICES=1"]),
        ("cuda", (0, 1), ["CUDA_DEVICE_ORDER=PCI_BUS_ID", "CUDA_VISIBLE_DEVICES=0,1"]),
        ("rocm", (1,), ["HIP_VISIBLE_DEVICES=1"]),
        ("vulkan", (2,), ["GGML_VK_VISIBLE_DEVICES=2"]),
        ("sycl", (0, 1), ["ONEAPI_DEVICE_SELECTOR=level_zero:0,1"]),
        ("cpu", (1,), None),
        ("metal", (0,), None),
        ("unknown", (0,), None),
    ],
)
def test_vendor_variables(vendor: str, devices: tuple[int, ...], words: list[str] | None) -> None:
    assert device_variables(vendor, devices) == words


@pytest.mark.parametrize(
    ("variant", "kind", "vendor"),
    [
        ("cuda", "llama", "cuda"),
        ("cuda-12.8", "llama", "cuda"),
        ("rocm", "llama", "rocm"),
        ("hip-radeon", "llama", "rocm"),
        ("vulkan", "llama", "vulkan"),
        ("sycl-fp16", "llama", "sycl"),
        ("cpu", "llama", "cpu"),
        ("metal", "llama", "metal"),
        ("openvino", "llama", "unknown"),
        ("cuda", "vllm", "cuda"),
        ("rocm", "vllm", "rocm"),
        ("cpu", "vllm", "cpu"),
    ],
)
def test_a_managed_build_names_its_vendor_in_its_variant(
    variant: str, kind: str, vendor: str
) -> None:
    assert build_vendor(managed(variant, kind), None) == vendor


@pytest.mark.parametrize(
    ("backends", "vendor"),
    [
        (["CPU", "CUDA"], "cuda"),
        (["CPU", "ROCm"], "rocm"),
        (["CPU", "Vulkan"], "vulkan"),
        (["CPU"], "cpu"),
        (["BLAS", "CPU"], "cpu"),
        (["CPU", "CUDA", "Vulkan"], "unknown"),  # two GPU backends: which one counts is open
        (None, "unknown"),
    ],
)
def test_a_manual_row_takes_its_vendor_from_its_device_list(
    backends: list[str] | None, vendor: str
) -> None:
    caps = Capabilities(options=["--help"], backends=backends)
    assert build_vendor(manual(), caps) == vendor
    assert build_vendor(manual(), None) == "unknown"


def test_user_env_comes_after_and_replaces_a_device_variable() -> None:
    ours = ["CUDA_DEVICE_ORDER=PCI_BUS_ID", "CUDA_VISIBLE_DEVICES=1"]
    assert merge_env(ours, ["GGML_CUDA_ENABLE_UNIFIED_MEMORY=1"]) == [
        *ours,
        "GGML_CUDA_ENABLE_UNIFIED_MEMORY=1",
    ]
    assert merge_env(ours, ["CUDA_VISIBLE_DEVICES=0"]) == [
        "CUDA_DEVICE_ORDER=PCI_BUS_ID",
        "CUDA_VISIBLE_DEVICES=0",
    ]


def test_plan_for_each_kind_of_build() -> None:
    ov = ModelOverride(device="1", env=["X_Y=2"])
    cards = gpus()
    cuda = plan_devices(ov, managed("cuda"), None, cards)
    assert cuda.env == ("CUDA_DEVICE_ORDER=PCI_BUS_ID", "CUDA_VISIBLE_DEVICES=1", "X_Y=2")
    assert cuda.memory_gb == (12.0,) and cuda.notes == ()
    rocm = plan_devices(ov, managed("rocm"), None, cards)
    assert rocm.env == ("HIP_VISIBLE_DEVICES=1", "X_Y=2")
    assert rocm.memory_gb is None  # no AMD card 1 here: sized as without a pin, and said
    assert rocm.notes == (
        "device 1 is not one of this host's ROCm GPUs (none); sized as without a pin",
    )
    cpu = plan_devices(ov, managed("cpu"), None, cards)
    assert cpu.env == ("X_Y=2",) and cpu.memory_gb is None
    assert cpu.notes == (
        "device 1 does not apply: llama-server@b1-cpu is a CPU build (no GPU to choose)",
    )
    unknown = plan_devices(ov, manual(), None, cards)
    assert unknown.env == ("X_Y=2",)
    assert "not known" in unknown.notes[0] and "set the variable with env" in unknown.notes[0]
    unpinned = plan_devices(ModelOverride(env=["X_Y=2"]), managed("cuda"), None, cards)
    assert unpinned.env == ("X_Y=2",) and unpinned.notes == () and unpinned.memory_gb is None


def test_vulkan_counts_every_adapter_and_cuda_only_nvidia() -> None:
    mixed = gpus("AMD Radeon RX 7900 XTX:24;NVIDIA GeForce RTX 3060:12")
    assert [(a.vendor, a.index) for a in mixed] == [("amd", 0), ("nvidia", 0)]
    ov = ModelOverride(device="0")
    assert plan_devices(ov, managed("cuda"), None, mixed).memory_gb == (12.0,)
    assert plan_devices(ov, managed("rocm"), None, mixed).memory_gb == (24.0,)
    vk = plan_devices(ModelOverride(device="1"), managed("vulkan"), None, mixed)
    assert vk.memory_gb == (12.0,) and vk.env == ("GGML_VK_VISIBLE_DEVICES=1",)


def test_gpu_override_syntax_is_backward_compatible() -> None:
    assert parse_gpu_override("NVIDIA GeForce RTX 4090;AMD Radeon Graphics") == [
        Adapter("NVIDIA GeForce RTX 4090", "nvidia"),
        Adapter("AMD Radeon Graphics", "amd"),
    ]
    assert [(a.name, a.memory_gb) for a in parse_gpu_override(TWO_CARDS)] == [
        ("NVIDIA GeForce RTX 4090", 24.0),
        ("NVIDIA GeForce RTX 3060", 12.0),
    ]
    # a colon not followed by a size stays part of the name; nonsense sizes are not sizes
    assert [(a.name, a.memory_gb) for a in parse_gpu_override("Card: X;Y:-3;Z:nan;W:1e9")] == [
        ("Card: X", None),
        ("Y:-3", None),
        ("Z:nan", None),
        ("W:1e9", None),
    ]
    assert [a.line() for a in gpus()] == [
        "GPU 0: NVIDIA GeForce RTX 4090, 24.0 GiB (nvidia)",
        "GPU 1: NVIDIA GeForce RTX 3060, 12.0 GiB (nvidia)",
    ]


def test_rocm_smi_and_drm_report_amd_memory(tmp_path: Path) -> None:
    def rocm(argv: list[str]) -> str:
        if argv[0] != "rocm-smi":
            raise FileNotFoundError(argv[0])
        return (
            '{"card0": {"Card Series": "Radeon RX 7900 XTX", "VRAM Total Memory (B)": '
            '"25753026560"}, "card1": {"Card Series": "Radeon RX 7600", '
            '"VRAM Total Memory (B)": "8573157376"}, "system": {"x": 1}}'
        )

    host = detect_host({}, run=rocm, drm_root=tmp_path, system="Linux", machine="x86_64")
    assert [(a.name, a.index, round(a.memory_gb or 0, 1)) for a in host.adapters] == [
        ("Radeon RX 7900 XTX", 0, 24.0),
        ("Radeon RX 7600", 1, 8.0),
    ]
    card = tmp_path / "drm" / "card0" / "device"
    card.mkdir(parents=True)
    (card / "vendor").write_text("0x1002\n")
    (card / "mem_info_vram_total").write_text(str(16 << 30) + "\n")
    host = detect_host(
        {}, run=no_commands, drm_root=tmp_path / "drm", system="Linux", machine="x86_64"
    )
    assert [(a.vendor, a.memory_gb) for a in host.adapters] == [("amd", 16.0)]


@pytest.mark.parametrize(
    ("value", "stored"),
    [("1", "1"), ("0,1", "0,1"), (" 0 , 1 ", "0,1"), (1, "1"), ([0, 1], "0,1")],
)
def test_device_values(value: object, stored: str) -> None:
    assert validate(ModelOverride, {"device": value}).device == stored


@pytest.mark.parametrize(
    "value",
    ["", "a", "-1", "1.5", "0,0", "0;1", "1\n", "\u0661", True, 1.0, "256", ",".join("0" * 17)],
)
def test_bad_device_values_are_refused(value: object) -> None:
    with pytest.raises(ValueError, match="device"):
        validate(ModelOverride, {"device": value})


@pytest.mark.parametrize(
    "value",
    [
        "A=1\nB=2",  # a newline inside one word
        ["A=1\npwn: x"],
        ["A=x\u202ey"],  # bidi override
        ["A=x\u200by"],  # zero-width space (a format character)
        ["A=x\u2028y"],  # line separator
        ["A=x\x00y"],
        ["a=1"],  # llama-swap's schema wants capitals
        ["1A=1"],
        ["A"],
        ["=1"],
        ["A B=1"],
        "A=1 pwn:",  # the second word is no KEY=VALUE
        "A='1",  # an open quote
        [1],
    ],
)
def test_hostile_env_is_refused(value: object) -> None:
    with pytest.raises(ValueError, match="env"):
        validate(ModelOverride, {"env": value})


def test_env_values_with_yaml_characters_are_kept_as_they_are() -> None:
    ov = validate(ModelOverride, {"env": 'A="x: y # z" B=[1] C=\'{"k": 1}\' D='})
    assert ov.env == ["A=x: y # z", "B=[1]", 'C={"k": 1}', "D="]


def test_device_warning_names_the_gpus_there_are() -> None:
    assert device_warning("1", gpus()) == ()
    assert device_warning("0,1", gpus()) == ()
    assert device_warning("7", gpus()) == (
        "device 7 is not a GPU this host reports (GPUs: 0: NVIDIA GeForce RTX 4090, 24.0 GiB "
        "(nvidia), 1: NVIDIA GeForce RTX 3060, 12.0 GiB (nvidia)); kept as set",
    )
    assert device_warning("0", ()) == (
        "device 0 is not a GPU this host reports (GPUs: none); kept as set",
    )


@pytest.mark.parametrize(
    ("memory", "tp", "card"),
    [
        ((24.0,), None, 24.0),
        ((24.0, 12.0), None, 36.0 - LLAMA_FIXED_GB),  # llama.cpp: layers over both cards
        ((24.0, 12.0), 2, 24.0),  # vLLM: equal shares, the small card sets them
        ((24.0, 12.0), 1, 24.0),  # vLLM on the first card only
        ((16.0, 16.0, 16.0, 16.0), 4, 64.0),
    ],
)
def test_memory_of_several_devices(memory: tuple[float, ...], tp: int | None, card: float) -> None:
    assert devices_card_gb(memory, tensor_parallel=tp) == pytest.approx(card)


def model(fmt: Literal["gguf", "hf"] = "gguf") -> DiscoveredModel:
    return DiscoveredModel(id="m", path="/models/m.gguf", format=fmt, size_bytes=4 << 30, meta=META)


def settings(row: BackendRow, ov: ModelOverride, **kw: object) -> Settings:
    return Settings(backends=[row], models={"m": ov}, **kw)  # type: ignore[arg-type]


def star(component: str, kind: str, version: str) -> BackendRow:
    """The activated (★) row of an installed component, on a CUDA build."""
    path = f"/b/{component}/{component}"
    return BackendRow(
        id=component, kind=kind, path=path, managed=True, default=True,
        component=component, version=version, variant="cuda",
    )  # fmt: skip


CUDA_ROW = star("llama-server", "llama", "b1")
VLLM_ROW = star("vllm", "vllm", "0.11.0")


def planned(s: Settings, cards: tuple[Adapter, ...] = (), card_gb: float | None = 24.0) -> Entry:
    entry = plan_model(s, model(), card_gb, gpus=cards)
    assert isinstance(entry, Entry)
    return entry


def test_llama_context_is_sized_for_the_pinned_card() -> None:
    cards = gpus()
    on_small = planned(settings(CUDA_ROW, ModelOverride(device="1")), cards)
    on_big = planned(settings(CUDA_ROW, ModelOverride(device="0")), cards)
    ctx = {e.capabilities["context"] for e in (on_small,)}
    expected_small = llama_sizing(META, 4.0, 12.0, None, headroom_gb=0.1).ctx
    expected_big = llama_sizing(META, 4.0, 24.0, None, headroom_gb=0.1).ctx
    assert ctx == {expected_small} and expected_small < expected_big
    assert on_big.capabilities["context"] == expected_big
    assert on_small.metadata["est_vram_gb"] <= 12.0
    assert on_small.env == ("CUDA_DEVICE_ORDER=PCI_BUS_ID", "CUDA_VISIBLE_DEVICES=1")
    # a global budget meant for the big card does not size the small card past its memory
    budgeted = planned(settings(CUDA_ROW, ModelOverride(device="1"), vram_budget_gb=22), cards)
    assert budgeted.capabilities["context"] == expected_small
    both = planned(settings(CUDA_ROW, ModelOverride(device="0,1")), cards)
    expected_both = llama_sizing(META, 4.0, 36.0 - LLAMA_FIXED_GB, None, headroom_gb=0.1).ctx
    assert both.capabilities["context"] == expected_both


def test_vllm_on_two_devices_runs_tensor_parallel_over_them() -> None:
    cards = gpus()
    entry = planned(settings(VLLM_ROW, ModelOverride(device="0,1")), cards)
    assert ["--tensor-parallel-size", "2"] in entry.groups
    assert entry.env == ("CUDA_DEVICE_ORDER=PCI_BUS_ID", "CUDA_VISIBLE_DEVICES=0,1")
    util = next(g[1] for g in entry.groups if g[0] == "--gpu-memory-utilization")
    alone = planned(settings(VLLM_ROW, ModelOverride()), (), card_gb=24.0)
    util_alone = next(g[1] for g in alone.groups if g[0] == "--gpu-memory-utilization")
    assert float(util) <= float(util_alone)  # a share of 2 x 12 GiB, not of one 24 GiB card
    one = planned(settings(VLLM_ROW, ModelOverride(device="1")), cards)
    assert not any(g[0] == "--tensor-parallel-size" for g in one.groups)
    told = planned(settings(VLLM_ROW, ModelOverride(device="0,1", vllm_tensor_parallel=4)), cards)
    assert ["--tensor-parallel-size", "4"] in told.groups
    assert any("more than the 2 GPUs" in n for n in told.notes)
