from __future__ import annotations

import pytest

from backendmgr.config.models import BackendRow
from backendmgr.registry.kinds import class_taken, classes_of


@pytest.mark.parametrize(
    ("kind", "classes"),
    [
        ("llama", {"llm"}),
        ("llama.cpp", {"llm"}),
        ("server", {"llm"}),
        ("vllm", {"llm"}),
        (" VLLM ", {"llm"}),
        ("sd", {"image"}),
        ("sd-server", {"image"}),
        ("image", {"image"}),
        ("tts", {"tts"}),
        ("tts-server", {"tts"}),
        ("speech", {"tts"}),
        ("ttscpp", {"tts"}),
        ("tts.cpp", {"tts"}),
        ("kokoro", {"tts"}),
        ("asr", {"asr"}),
        ("parakeet", {"asr"}),
        ("parakeet-server", {"asr"}),
        ("transcribe", {"asr"}),
        ("audiocpp", {"tts", "asr"}),
        ("audio.cpp", {"tts", "asr"}),
        ("audiocpp-server", {"tts", "asr"}),
        ("sam", {"segment"}),
        ("sam3", {"segment"}),
        ("segment", {"segment"}),
        ("trellis2", {"3d"}),
        ("trellis", {"3d"}),
        ("3d", {"3d"}),
        ("upscale", {"upscale"}),
        ("realesrgan", {"upscale"}),
        ("esrgan", {"upscale"}),
        ("custom", set()),
        ("lama", set()),
        ("", set()),
    ],
)
def test_kind_classes(kind: str, classes: set[str]) -> None:
    assert set(classes_of(kind)) == classes


def _row(rid: str, kind: str) -> BackendRow:
    return BackendRow(id=rid, kind=kind, path=f"/bin/{rid}")


@pytest.mark.parametrize(
    ("rows", "kind", "taken"),
    [
        ([], "llama", False),
        ([_row("a", "llama")], "vllm", True),
        ([_row("a", "sd")], "llama", False),
        ([_row("p", "parakeet")], "audiocpp", True),  # asr populated → audio.cpp's set is taken
        ([_row("t", "kokoro")], "audiocpp", True),
        ([_row("x", "audiocpp")], "parakeet", True),
        ([_row("x", "custom")], "custom", False),
        ([_row("x", "upscale")], "sam", False),
    ],
)
def test_class_taken(rows: list[BackendRow], kind: str, taken: bool) -> None:
    assert class_taken(rows, kind) is taken
