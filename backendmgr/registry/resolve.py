"""Which row serves a model, and why (SPEC §4), plus the legacy fallback executables."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import field
from typing import Literal

from ..config.models import BackendRow, ModelOverride, Settings
from ..immutable import frozen
from .kinds import ModelClass, classes_of, is_audiocpp, normalize_kind

__all__ = [
    "Resolution",
    "View",
    "legacy_fallbacks",
    "resolve",
    "resolve_preferring",
]

View = Literal["all", "without_audiocpp", "only_audiocpp"]
"""``without_audiocpp`` serves other tts/asr engines; ``only_audiocpp`` serves audio.cpp models."""

FALLBACK_KEYS: dict[str, str] = {
    "llm": "server_exe",
    "image": "sd_server_exe",
    "tts": "tts_server_exe",
    "asr": "asr_server_exe",
}

_FALLBACK_FAMILIES: dict[str, frozenset[str]] = {
    "server_exe": frozenset({"llama", "llama.cpp", "server"}),
    "sd_server_exe": frozenset({"sd", "sd-server", "image"}),
    "tts_server_exe": frozenset({"tts", "tts-server", "speech"}),
    "asr_server_exe": frozenset({"asr", "parakeet", "parakeet-server", "transcribe"}),
}


@frozen(slots=True)
class Resolution:
    """The row that serves a model (None: the legacy fallback ``exe``), and the reason."""

    cls: str
    row: BackendRow | None
    reason: str
    exe: str | None
    notes: tuple[str, ...] = field(default=())

    @property
    def kind(self) -> str:
        return normalize_kind(self.row.kind) if self.row else ""


def legacy_fallbacks(settings: Settings) -> dict[str, str]:
    """The fallback executables, derived from the registry (first row per kind family).

    A later ★ row replaces a slot filled by a non-★ row; with no row the file's value stays.
    """
    chosen: dict[str, BackendRow] = {}
    for row in settings.backends:
        if not row.path.strip():
            continue
        kind = normalize_kind(row.kind)
        for key, family in _FALLBACK_FAMILIES.items():
            if kind not in family:
                continue
            current = chosen.get(key)
            if current is None or (row.default and not current.default):
                chosen[key] = row
    return {
        key: chosen[key].path if key in chosen else getattr(settings, key)
        for key in _FALLBACK_FAMILIES
    }


def _in_view(row: BackendRow, view: View) -> bool:
    if view == "without_audiocpp":
        return not is_audiocpp(row.kind)
    if view == "only_audiocpp":
        return is_audiocpp(row.kind)
    return True


def _pick_pin(
    settings: Settings,
    override: ModelOverride,
    cls: str,
    view: View,
    embedding: bool,
    notes: list[str],
) -> BackendRow | None:
    pin = override.backend
    if not pin:
        return None
    row = settings.row(pin)
    if row is None:
        notes.append(f'stale pin "{pin}" ignored')
        return None
    if not normalize_kind(row.kind):
        notes.append(f'pin "{pin}" ignored: it serves no model')
        return None
    if not _in_view(row, view):
        if view == "only_audiocpp":
            notes.append(f'pin "{pin}" ignored: only audio.cpp rows serve this model')
        else:
            notes.append(f'pin "{pin}" ignored: an audio.cpp row does not serve this model')
        return None
    if embedding and normalize_kind(row.kind) == "vllm":
        notes.append(f'pin "{pin}" ignored: vllm has no embedding emitter; using the class default')
        return None
    classes = classes_of(row.kind)
    if classes and cls not in classes:
        notes.append(f'pin "{pin}" serves {", ".join(sorted(classes))}, not {cls}')
        return None
    return row


def _candidates(settings: Settings, cls: str, view: View, embedding: bool) -> list[BackendRow]:
    return [
        row
        for row in settings.backends
        if cls in classes_of(row.kind)
        and _in_view(row, view)
        and not (embedding and normalize_kind(row.kind) == "vllm")
    ]


def _by_class(
    cls: str, rows: Sequence[BackendRow], settings: Settings, notes: list[str]
) -> Resolution:
    star = next((row for row in rows if row.default), None)
    if star is not None:
        return Resolution(cls, star, f"default (★) for {cls}", star.path, tuple(notes))
    if rows:
        return Resolution(cls, rows[0], f"first {cls} row", rows[0].path, tuple(notes))
    key = FALLBACK_KEYS.get(cls)
    if key is None:
        return Resolution(cls, None, f"no {cls} row in the registry", None, tuple(notes))
    exe = legacy_fallbacks(settings)[key]
    return Resolution(cls, None, f"no {cls} row; legacy {key}", exe, tuple(notes))


def resolve(
    settings: Settings,
    override: ModelOverride,
    cls: ModelClass | str,
    *,
    view: View = "all",
    embedding: bool = False,
) -> Resolution:
    """Pin, else the class's ★ row, else its first row, else the legacy fallback.

    >>> resolve(Settings(), ModelOverride(), "llm").exe
    'llama-server'
    """
    notes: list[str] = []
    pinned = _pick_pin(settings, override, cls, view, embedding, notes)
    if pinned is not None:
        return Resolution(cls, pinned, f'pinned to "{pinned.id}"', pinned.path, tuple(notes))
    return _by_class(cls, _candidates(settings, cls, view, embedding), settings, notes)


def resolve_preferring(
    settings: Settings,
    override: ModelOverride,
    cls: ModelClass | str,
    prefer_kind: str,
    *,
    view: View = "all",
) -> Resolution:
    """Like :func:`resolve`, but rows of ``prefer_kind`` come first (vllm for HF folders)."""
    notes: list[str] = []
    pinned = _pick_pin(settings, override, cls, view, False, notes)
    if pinned is not None:
        return Resolution(cls, pinned, f'pinned to "{pinned.id}"', pinned.path, tuple(notes))
    prefer = normalize_kind(prefer_kind)
    preferred = [
        row for row in _candidates(settings, cls, view, False) if normalize_kind(row.kind) == prefer
    ]
    if preferred:
        star = next((row for row in preferred if row.default), None)
        row = star or preferred[0]
        why = f"default {prefer} row" if star else f"first {prefer} row"
        return Resolution(cls, row, f"{why} ({prefer} preferred)", row.path, tuple(notes))
    return _by_class(cls, _candidates(settings, cls, view, False), settings, notes)
