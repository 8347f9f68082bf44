"""Measured contexts: one record per (model, build, device), and their use by the emitter.

``tune`` writes a record with the figure it measured; ``generate`` plans a model whose record
still matches (same model file, same build, same device) at the tuned context in place of the
estimate. A model the user gave a ``ctx`` keeps theirs. A new build, a changed model file or
another card make the record not match: the model is "not tuned" again until ``tune`` runs.
The file lives in the data home, written atomically under a lock.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from ..digest import sha256_hex
from ..emit.sizing import tuned_sentence, tuning_text
from ..immutable import frozen
from ..record import Invalid, Record, hints, load, plain
from .store import TUNED_NAME, TunedStore

if TYPE_CHECKING:
    from ..catalog.host import Host
    from ..config.models import Settings
    from ..discovery.models import DiscoveredModel
    from ..emit.plan import Entry
    from ..install.builds import BuildStore
    from ..registry.resolve import Resolution

__all__ = [
    "TUNED_NAME",
    "Place",
    "TunedRecord",
    "TunedStore",
    "apply_tuned",
    "build_fingerprint",
    "device_of",
    "find_tuned",
    "load_kept",
    "model_fingerprint",
    "tuned_sentence",
    "tuning_text",
]

R = TypeVar("R", bound=Record)


class Place(Protocol):
    """What the fingerprints need to know about where we run (:class:`..manager.probe.Site`)."""

    @property
    def builds(self) -> BuildStore: ...

    @property
    def environ(self) -> dict[str, str]: ...

    @property
    def host(self) -> Host: ...

    @property
    def card_gb(self) -> float | None: ...


@frozen(kw_only=True)
class TunedRecord(Record):
    """The context ``tune`` measured for one model on one build and device."""

    model: str
    ctx: int
    measured_gib: float
    measured_by: str
    budget_gib: float
    build: str  # the row (or executable) it was measured on, to show
    device: str
    model_fp: str
    build_fp: str
    tuned_at: str
    attempts: int = 0


def load_kept(cls: type[R], raw: dict[str, Any], where: str) -> R | None:
    """One record of a store as ``cls``, or None when it is not one (a record of the wrong
    shape is passed over); keys it does not name are left out, so that a file another version
    wrote with more fields still counts."""
    known = hints(cls)
    try:
        return load(cls, {k: v for k, v in raw.items() if k in known}, where)
    except Invalid:
        return None


def model_fingerprint(model: DiscoveredModel) -> str:
    """Path, size and modification time of the model's file (or folder)."""
    try:
        st = os.stat(model.path)
        stamp = f"{st.st_size}:{st.st_mtime_ns}"
    except OSError:
        stamp = "missing"
    text = json.dumps([model.path, model.size_bytes, model.shards, stamp])
    return sha256_hex(text.encode())[:32]


def build_fingerprint(place: Place, res: Resolution, exe: str) -> str:
    """The receipt of a managed build; path, size and mtime of any other executable."""
    from ..manager.facts import build_identity

    ident = build_identity(place.builds, place.environ, res.row, exe)
    return sha256_hex(ident.encode())[:32]


def device_of(place: Place) -> str:
    """The card(s) the figure holds for: adapter names and size, or ``cpu``."""
    names = [a.name for a in place.host.adapters]
    card = place.card_gb
    label = "; ".join(names) if names else "cpu"
    return f"{label} ({card:.1f} GiB)" if card else label


def find_tuned(
    records: dict[str, list[dict[str, Any]]], model: str, key: tuple[str, str, str]
) -> TunedRecord | None:
    """The model's record of :meth:`.store.TunedStore.records` measured for ``key`` (model,
    build and device fingerprints), or None; a record of the wrong shape is passed over."""
    for raw in records.get(model, []):
        record = load_kept(TunedRecord, raw, TUNED_NAME)
        if record is not None and (record.model_fp, record.build_fp, record.device) == key:
            return record
    return None


def key_of(place: Place, entry: Entry) -> tuple[str, str, str]:
    """(model, build, device) fingerprints of a planned entry."""
    return (
        model_fingerprint(entry.model),
        build_fingerprint(place, entry.resolution, entry.argv[0]),
        device_of(place),
    )


def apply_tuned(
    place: Place,
    records: dict[str, list[dict[str, Any]]],
    settings: Settings,
    models: Sequence[DiscoveredModel],
    plans: list[Any],
    replan: Callable[[Settings, DiscoveredModel], Any],
) -> list[Any]:
    """``plans`` with every model that has a matching record planned at its tuned context."""
    from ..emit.plan import Entry
    from ..emit.sizing import is_over_budget

    if not records:
        return plans
    out = list(plans)
    for i, (model, planned) in enumerate(zip(models, plans, strict=True)):
        if not isinstance(planned, Entry) or model.id not in records:
            continue
        ov = settings.override(model.id)
        if ov.ctx is not None:  # the user's own ctx wins
            continue
        record = find_tuned(records, model.id, key_of(place, planned))
        if record is None:
            continue
        pinned = dataclasses.replace(ov, ctx=record.ctx)
        tuned = replan(
            dataclasses.replace(settings, models={**settings.models, model.id: pinned}), model
        )
        if not isinstance(tuned, Entry):
            continue
        note = tuned_sentence(record.ctx, record.measured_gib, record.measured_by)
        # what was measured to fit outweighs an estimate that says it would not
        kept = tuple(n for n in tuned.notes if not is_over_budget(n))
        out[i] = dataclasses.replace(tuned, tuned=plain(record), notes=(*kept, note))
    return out
