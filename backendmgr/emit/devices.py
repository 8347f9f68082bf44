"""The single-device pin (issue 24): which variables put a model on its GPUs, and their memory.

Pure: a model's override, the row that resolved for it, that build's probed capabilities and
the host's GPUs in; the entry's ``env:`` list, notes and the memory to size for out. The
variables follow the build that *resolves for the model* (the same resolver as its command),
so a model pinned to a ROCm build gets ROCm's variables even when the ★ default is a CUDA
build, and an unpinned model follows whichever build the default or activation points at.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import field
from typing import TYPE_CHECKING

from ..catalog.capabilities import Capabilities, promised_backend
from ..config.models import ModelOverride, Settings, device_indices
from ..immutable import frozen
from ..registry.build_ids import build_id_of
from ..registry.resolve import Resolution

if TYPE_CHECKING:  # the adapters come probed: the probe's module is not the plan's to load
    from ..catalog.host import Adapter

__all__ = [
    "DevicePlan",
    "build_vendor",
    "device_variables",
    "device_warning",
    "merge_env",
    "pin_notes",
    "plan_devices",
    "uses_devices",
    "vendor_cards",
]

# Canonical compute backend (capabilities' names, a variant's promise) → our vendor word.
_VENDORS = {"CUDA": "cuda", "ROCm": "rocm", "Vulkan": "vulkan", "SYCL": "sycl", "Metal": "metal"}
_NO_PIN = frozenset({"cpu", "metal"})  # no device to choose: the note says the pin is idle
# Which host adapters a vendor's runtime numbers (Vulkan and unknown count every adapter).
_HOST_VENDOR = {"cuda": "nvidia", "rocm": "amd", "sycl": "intel"}
_LABEL = {"cuda": "CUDA", "rocm": "ROCm", "vulkan": "Vulkan", "sycl": "SYCL"}


@frozen(slots=True)
class DevicePlan:
    """What a model's ``device`` pin adds: llama-swap env, notes and the pinned cards."""

    env: tuple[str, ...] = ()
    notes: tuple[str, ...] = field(default=())
    memory_gb: tuple[float, ...] | None = None  # each pinned card's memory, when all are known
    devices: tuple[int, ...] = ()
    vendor: str | None = None


_UNPINNED = DevicePlan()  # the plan of most models (immutable: one for them all)


def build_vendor(res: Resolution, caps: Capabilities | None) -> str:
    """``cuda``, ``rocm``, ``vulkan``, ``sycl``, ``metal``, ``cpu`` or ``unknown``.

    A managed build says it in its variant (``cuda-12.8``, ``rocm``; vLLM's ``cuda``/``rocm``);
    any other row by the devices its ``--list-devices`` probe listed: one GPU backend names the
    vendor, none but the CPU makes it a CPU build, anything else is unknown.
    """
    row = res.row
    if row is not None and row.managed and row.variant:
        promised = promised_backend(row.variant)
        if promised is not None:
            return _VENDORS.get(promised, "unknown")
        head = row.variant.strip().lower()
        return "cpu" if head == "cpu" or head.startswith("cpu-") else "unknown"
    if caps is None or caps.backends is None:
        return "unknown"
    gpus = {_VENDORS.get(b, "unknown") for b in caps.backends if b not in ("CPU", "BLAS", "RPC")}
    if len(gpus) == 1:
        return gpus.pop()
    return "cpu" if not gpus and "CPU" in caps.backends else "unknown"


def device_variables(vendor: str, devices: Sequence[int]) -> list[str] | None:
    """The ``KEY=VALUE`` words that show a build only ``devices``; None where none apply.

    CUDA numbers its cards fastest first unless told otherwise; ``CUDA_DEVICE_ORDER`` makes
    its numbers the PCI order that ``nvidia-smi`` (and so ``catalog``) shows.
    """
    ids = ",".join(str(d) for d in devices)
    table = {
        "cuda": ["CUDA_DEVICE_ORDER=PCI_BUS_ID", f"CUDA_VISIBLE_DEVICES={ids}"],
        "rocm": [f"HIP_VISIBLE_DEVICES={ids}"],
        "vulkan": [f"GGML_VK_VISIBLE_DEVICES={ids}"],
        "sycl": [f"ONEAPI_DEVICE_SELECTOR=level_zero:{ids}"],
    }
    return table.get(vendor)


def merge_env(ours: Sequence[str], theirs: Sequence[str]) -> list[str]:
    """The device variables, then the user's ``env``; a user's KEY replaces ours, so each
    variable appears once and the user's value is the one the process sees."""
    keys = {w.partition("=")[0] for w in theirs}
    return [w for w in ours if w.partition("=")[0] not in keys] + list(theirs)


def vendor_cards(vendor: str, gpus: Sequence[Adapter]) -> list[Adapter]:
    """The host's adapters as ``vendor``'s runtime numbers them."""
    want = _HOST_VENDOR.get(vendor)
    if want is None:
        return list(gpus)
    return sorted((g for g in gpus if g.vendor == want), key=lambda g: g.index)


def _listed(cards: Sequence[Adapter]) -> str:
    return "; ".join(f"{i}: {c.name}" for i, c in enumerate(cards)) or "none"


def _who(res: Resolution) -> str:
    row = res.row
    return build_id_of(row) or (row.id if row is not None else res.exe or "the fallback executable")


def plan_devices(
    ov: ModelOverride,
    res: Resolution,
    caps: Capabilities | None,
    gpus: Sequence[Adapter],
) -> DevicePlan:
    """The entry's ``env`` and what to size for; a model without ``device`` only gets its
    own ``env`` words."""
    if not ov.device:
        return DevicePlan(env=tuple(ov.env)) if ov.env else _UNPINNED
    devices = device_indices(ov.device)
    vendor = build_vendor(res, caps)
    words = device_variables(vendor, devices)
    notes: list[str] = []
    if words is None:
        if vendor in _NO_PIN:
            notes.append(
                f"device {ov.device} does not apply: {_who(res)} is a {vendor.upper()} build "
                "(no GPU to choose)"
                if vendor == "cpu"
                else f"device {ov.device} does not apply: {_who(res)} is a Metal build "
                "(one GPU, no variable chooses it)"
            )
        else:
            notes.append(
                f"device {ov.device} not applied: which GPU vendor {_who(res)} is built for is "
                "not known (no variant, and its --list-devices named no single GPU backend); "
                "set the variable with env"
            )
        return DevicePlan(tuple(merge_env([], ov.env or [])), tuple(notes), None, devices, vendor)
    cards = vendor_cards(vendor, gpus)
    missing = [d for d in devices if d >= len(cards)]
    memory: tuple[float, ...] | None = None
    if missing:
        notes.append(
            f"device {','.join(map(str, missing))} is not one of this host's "
            f"{_LABEL.get(vendor, vendor)} GPUs ({_listed(cards)}); sized as without a pin"
        )
    else:
        known = [cards[d].memory_gb for d in devices]
        if all(m is not None for m in known):
            memory = tuple(m for m in known if m is not None)
        else:
            notes.append(f"device {ov.device}: memory not reported; sized as without a pin")
    env = merge_env(words, ov.env or [])
    return DevicePlan(tuple(env), tuple(notes), memory, devices, vendor)


def uses_devices(settings: Settings) -> bool:
    """Whether any model is pinned to a device (only then does planning need the GPU list)."""
    return any(ov.device for ov in settings.models.values())


def device_warning(device: str | None, gpus: Sequence[Adapter]) -> tuple[str, ...]:
    """``set MODEL device=N``: a warning naming the GPUs there are when N is none of them.

    Any vendor's index counts here (the vendor is the resolved build's, known when the
    config is generated; ``generate`` then notes a device that build's vendor lacks)."""
    if not device:
        return ()
    wanted = device_indices(device)
    present = {g.index for g in gpus} | set(range(len(gpus)))
    missing = [d for d in wanted if d not in present]
    if not missing:
        return ()
    there = ", ".join(g.line().removeprefix("GPU ") for g in gpus) or "none"
    which = ",".join(map(str, missing))
    return (f"device {which} is not a GPU this host reports (GPUs: {there}); kept as set",)


def pin_notes(settings: Settings, gpus: Sequence[Adapter]) -> list[str]:
    """``doctor``: every model whose ``device`` names a GPU this host does not report."""
    return [
        f'model "{model}": {warning}'
        for model, ov in sorted(settings.models.items())
        for warning in device_warning(ov.device, gpus)
    ]
