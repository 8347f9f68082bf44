"""A failed start's cause with its fix, and the other builds that might serve the model.

Pure, over the settings, the host and a planned entry: ``verify`` attaches
:func:`failure_cause` to a failed result; ``verify --repair`` tries :func:`repair_order`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..catalog.capabilities import promised_backend
from ..catalog.matching import NATIVE_API
from ..limits import VERIFY_TIMEOUT_S
from ..registry.kinds import classes_of, normalize_kind
from ..registry.rows import build_id_of
from ..versioning import version_key
from .reasons import FailureCause, classify, explain

if TYPE_CHECKING:
    from ..catalog.host import Host
    from ..config.models import BackendRow, Settings
    from ..discovery.models import DiscoveredModel
    from ..registry.resolve import Resolution

__all__ = ["failure_cause", "host_apis", "newer_row", "other_rows", "repair_order"]


def other_rows(
    settings: Settings, model: DiscoveredModel, current: BackendRow | None, cls: str = "llm"
) -> list[BackendRow]:
    """Rows other than ``current`` whose kind serves the model: installed builds (their build
    rows, SPEC §3.2) newest first, then hand-made rows in registry order (they carry no version
    to order them by). A component's own row is left out: it follows activation, so a pin to it
    is not a pin to a build, and its build has a row of its own."""
    embedding = model.role != "chat"
    fitting = []
    for row in settings.backends:
        kind = normalize_kind(row.kind)
        if row.managed and not row.build:
            continue
        if current is not None and (row.id == current.id or row.path == current.path):
            continue
        if cls not in classes_of(row.kind):
            continue
        if (embedding and kind == "vllm") or (model.format == "hf" and kind != "vllm"):
            continue
        fitting.append(row)
    builds = sorted(
        (r for r in fitting if r.build and r.version),
        key=lambda r: version_key(r.version),
        reverse=True,
    )
    return builds + [r for r in fitting if not (r.build and r.version)]


def _gpu_api(variant: str) -> str | None:
    """The GPU API a variant is built for (``cuda-13.4`` → cuda, ``hip-radeon`` → rocm);
    None for a CPU build or a name that promises none."""
    head = variant.strip().lower().split("-", 1)[0]
    if head == "hip":
        return "rocm"
    return head if head == "openvino" or promised_backend(head) is not None else None


def host_apis(host: Host) -> tuple[tuple[str, ...], str]:
    """The GPU variants this host's adapters can use (as ``suggest_variant`` picks them: the
    vendor's own API or Vulkan), and the words for why; none without a GPU."""
    vendors = [a.vendor for a in host.adapters]
    if not vendors:
        return (), "no GPU adapter found"
    first = host.adapters[0]
    apis = {"nvidia": ("cuda", "vulkan"), "apple": ("metal",)}.get(first.vendor)
    if apis is None:
        apis = ("vulkan", *NATIVE_API.get(first.vendor, ()))
    return apis, f"{first.vendor.upper()} adapter ({first.name})"


def repair_order(
    settings: Settings,
    model: DiscoveredModel,
    current: BackendRow | None,
    host: Host,
    cls: str = "llm",
) -> list[tuple[BackendRow, str]]:
    """The rows ``--repair`` tries, with why each is where it is (issue 29): the activated
    build of a component, then installed builds whose variant this host can use (newest
    first), then hand-made rows (registry order), and last the builds of a GPU API this host
    has no adapter for: a host without a GPU never gets a GPU build while another serves."""
    apis, found = host_apis(host)
    activated = {
        build_id_of(r) for r in settings.backends if r.managed and not r.build and r.version
    }
    ranked: list[tuple[int, BackendRow, str]] = []
    for row in other_rows(settings, model, current, cls):
        api = _gpu_api(row.variant)
        usable = api is None or api in apis
        if row.build and row.id in activated and usable:
            ranked.append((0, row, f"the activated build of {row.component}"))
        elif row.build and usable:
            ranked.append((1, row, f"a {row.variant} build, which this host can use ({found})"))
        elif not row.build:
            ranked.append((2, row, "a hand-made row"))
        else:
            ranked.append((3, row, f"a {row.variant} build, tried last: {found} for {api}"))
    # newest first within a rank (other_rows' order), and in one release the host's own API
    # first (cuda before vulkan on NVIDIA, as suggest_variant picks), CPU builds after
    ranked.sort(key=lambda item: _preference(item[1], apis))
    ranked.sort(
        key=lambda item: version_key(item[1].version) if item[1].build else (), reverse=True
    )
    ranked.sort(key=lambda item: item[0])
    return [(row, why) for _, row, why in ranked]


def _preference(row: BackendRow, apis: tuple[str, ...]) -> int:
    api = _gpu_api(row.variant)
    return apis.index(api) if api in apis else len(apis)


def newer_row(
    settings: Settings, model: DiscoveredModel, current: BackendRow | None, cls: str = "llm"
) -> BackendRow | None:
    """The newest installed build that serves the model, if newer than ``current``'s."""
    for row in other_rows(settings, model, current, cls):
        if not (row.build and row.version):
            return None
        if current is None or not (current.managed and current.version):
            return row
        if normalize_kind(row.kind) != normalize_kind(current.kind):
            return row
        return row if version_key(row.version) > version_key(current.version) else None
    return None


LONGER_FLOOR_S = 600.0  # a never-healthy start's fix waits at least this long


def failure_cause(
    settings: Settings,
    model: DiscoveredModel,
    res: Resolution,
    reason: str | None,
    verb: str = "verify",
) -> FailureCause | None:
    """The recognised cause of ``reason`` with its fix, or None (the plain reason stands).
    ``verb`` is the command whose rerun with a longer ``--timeout`` is the fix for a start
    that never became healthy."""
    match = classify(reason)
    if match is None:
        return None
    row = res.row
    better = newer_row(settings, model, row, res.cls)
    waited = match.found.get("seconds")
    longer = None
    if waited is not None:
        longer = min(max(float(waited) * 4, LONGER_FLOOR_S), VERIFY_TIMEOUT_S.high)
    context = {
        "model": model.id,
        "component": row.component if row is not None and row.managed else None,
        "better": better.id if better is not None else None,
        "verb": verb,
        "longer": f"{longer:g}" if longer is not None else None,
    }
    return explain(match, context)
