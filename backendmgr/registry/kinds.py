"""Which classes of model each backend kind can serve (SPEC §3.1)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from ..config.models import BackendRow

__all__ = [
    "CLASSES",
    "KNOWN_KINDS",
    "ModelClass",
    "class_taken",
    "classes_of",
    "is_audiocpp",
    "normalize_kind",
]

ModelClass = Literal["llm", "image", "tts", "asr", "segment", "3d", "upscale"]
CLASSES: tuple[ModelClass, ...] = ("llm", "image", "tts", "asr", "segment", "3d", "upscale")

_FAMILIES: tuple[tuple[frozenset[str], frozenset[ModelClass]], ...] = (
    (frozenset({"llama", "llama.cpp", "server", "vllm"}), frozenset({"llm"})),
    (frozenset({"sd", "sd-server", "image"}), frozenset({"image"})),
    (
        frozenset({"tts", "tts-server", "speech", "ttscpp", "tts.cpp", "kokoro"}),
        frozenset({"tts"}),
    ),
    (frozenset({"asr", "parakeet", "parakeet-server", "transcribe"}), frozenset({"asr"})),
    (frozenset({"audiocpp", "audio.cpp", "audiocpp-server"}), frozenset({"tts", "asr"})),
    (frozenset({"sam", "sam3", "segment"}), frozenset({"segment"})),
    (frozenset({"trellis2", "trellis", "3d"}), frozenset({"3d"})),
    (frozenset({"upscale", "realesrgan", "esrgan"}), frozenset({"upscale"})),
)
_KIND_CLASSES: dict[str, frozenset[ModelClass]] = {
    kind: classes for kinds, classes in _FAMILIES for kind in kinds
}
# Every kind a new row may name: the table's kinds plus ``custom`` (pinned explicitly only).
KNOWN_KINDS: tuple[str, ...] = (*(k for kinds, _ in _FAMILIES for k in sorted(kinds)), "custom")
AUDIOCPP_KINDS = frozenset({"audiocpp", "audio.cpp", "audiocpp-server"})


def normalize_kind(kind: str) -> str:
    return kind.strip().lower()


def classes_of(kind: str) -> frozenset[ModelClass]:
    """The classes a kind serves; empty for ``custom`` and typos (pinned explicitly only)."""
    return _KIND_CLASSES.get(normalize_kind(kind), frozenset())


def is_audiocpp(kind: str) -> bool:
    return normalize_kind(kind) in AUDIOCPP_KINDS


def class_taken(rows: Iterable[BackendRow], kind: str) -> bool:
    """True when some row already serves any class that ``kind`` serves."""
    wanted = classes_of(kind)
    return any(classes_of(row.kind) & wanted for row in rows)
