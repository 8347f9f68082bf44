from __future__ import annotations

import pytest

from backendmgr.config.models import BackendRow, ModelOverride, Settings
from backendmgr.registry.resolve import legacy_fallbacks, resolve, resolve_preferring


def row(
    rid: str, kind: str, *, default: bool = False, path: str | None = None, **kw: object
) -> BackendRow:
    return BackendRow(id=rid, kind=kind, path=path or f"/bin/{rid}", default=default, **kw)  # type: ignore[arg-type]


def blank_path(made: BackendRow) -> BackendRow:
    """``made`` with a blank path, which its checks refuse: a row no config can give."""
    object.__setattr__(made, "path", " ")
    return made


def settings(*rows: BackendRow, **kw: object) -> Settings:
    return Settings(backends=list(rows), **kw)  # type: ignore[arg-type]


MIXED = settings(row("llama-vk", "llama"), row("vllm-1", "vllm", default=True), row("sd-1", "sd"))


@pytest.mark.parametrize(
    ("s", "pin", "cls", "row_id", "exe", "reason", "notes"),
    [
        (MIXED, None, "llm", "vllm-1", "/bin/vllm-1", "default (★) for llm", ()),
        (MIXED, "llama-vk", "llm", "llama-vk", "/bin/llama-vk", 'pinned to "llama-vk"', ()),
        (
            MIXED,
            "gone",
            "llm",
            "vllm-1",
            "/bin/vllm-1",
            "default (★) for llm",
            ('stale pin "gone" ignored',),
        ),
        (
            MIXED,
            "sd-1",
            "llm",
            "vllm-1",
            "/bin/vllm-1",
            "default (★) for llm",
            ('pin "sd-1" serves image, not llm',),
        ),
        (MIXED, None, "tts", None, "tts-server", "no tts row; legacy tts_server_exe", ()),
        (MIXED, None, "image", "sd-1", "/bin/sd-1", "first image row", ()),
        (MIXED, None, "segment", None, None, "no segment row in the registry", ()),
        (
            settings(row("a", "llama"), row("b", "llama")),
            None,
            "llm",
            "a",
            "/bin/a",
            "first llm row",
            (),
        ),
        # a pin is case-sensitive
        (
            MIXED,
            "LLAMA-VK",
            "llm",
            "vllm-1",
            "/bin/vllm-1",
            "default (★) for llm",
            ('stale pin "LLAMA-VK" ignored',),
        ),
        # a custom row serves no class, so only a pin reaches it
        (
            settings(row("c", "custom"), row("a", "llama")),
            "c",
            "llm",
            "c",
            "/bin/c",
            'pinned to "c"',
            (),
        ),
        (
            settings(row("c", "custom")),
            None,
            "llm",
            None,
            "llama-server",
            "no llm row; legacy server_exe",
            (),
        ),
        # pins to build rows win like any row
        (
            settings(
                row("llama-server", "llama", default=True, managed=True),
                row("llama-server@b1-rocm", "llama", managed=True, build=True),
            ),
            "llama-server@b1-rocm",
            "llm",
            "llama-server@b1-rocm",
            "/bin/llama-server@b1-rocm",
            'pinned to "llama-server@b1-rocm"',
            (),
        ),
    ],
)
def test_resolve(
    s: Settings,
    pin: str | None,
    cls: str,
    row_id: str | None,
    exe: str | None,
    reason: str,
    notes: tuple[str, ...],
) -> None:
    res = resolve(s, ModelOverride(backend=pin), cls)
    assert (res.row.id if res.row else None) == row_id
    assert res.exe == exe
    assert res.reason == reason
    assert res.notes == notes


def test_only_unpinned_models_follow_a_star_switch() -> None:
    s = settings(row("a", "llama", default=True), row("b", "llama"))
    switched = settings(row("a", "llama"), row("b", "llama", default=True))
    pinned = ModelOverride(backend="a")
    assert resolve(s, ModelOverride(), "llm").row.id == "a"  # type: ignore[union-attr]
    assert resolve(switched, ModelOverride(), "llm").row.id == "b"  # type: ignore[union-attr]
    assert resolve(switched, pinned, "llm").row.id == "a"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("s", "pin", "row_id", "reason"),
    [
        # HF folder: a vllm row beats the ★ llama row
        (
            settings(row("l", "llama", default=True), row("v", "vllm")),
            None,
            "v",
            "first vllm row (vllm preferred)",
        ),
        (
            settings(
                row("l", "llama", default=True), row("v1", "vllm"), row("v2", "vllm", default=True)
            ),
            None,
            "v2",
            "default vllm row (vllm preferred)",
        ),
        (settings(row("l", "llama", default=True)), None, "l", "default (★) for llm"),
        (settings(row("l", "llama"), row("v", "vllm")), "l", "l", 'pinned to "l"'),
    ],
)
def test_resolve_preferring(s: Settings, pin: str | None, row_id: str, reason: str) -> None:
    res = resolve_preferring(s, ModelOverride(backend=pin), "llm", "vllm")
    assert res.row is not None and res.row.id == row_id
    assert res.reason == reason


AUDIO = settings(
    row("ac", "audiocpp", default=True),
    row("pk", "parakeet"),
    row("ac@1", "audiocpp", build=True, managed=True),
    row("kk", "kokoro"),
)


@pytest.mark.parametrize(
    ("view", "cls", "pin", "row_id", "notes"),
    [
        # an audio.cpp ★ does not hide the parakeet row from a parakeet model
        ("without_audiocpp", "asr", None, "pk", ()),
        ("without_audiocpp", "tts", None, "kk", ()),
        ("all", "asr", None, "ac", ()),
        # audio.cpp models see audio.cpp rows only: a pin elsewhere is a no-op
        (
            "only_audiocpp",
            "asr",
            "pk",
            "ac",
            ('pin "pk" ignored: only audio.cpp rows serve this model',),
        ),
        ("only_audiocpp", "tts", "ac@1", "ac@1", ()),
        (
            "without_audiocpp",
            "asr",
            "ac",
            "pk",
            ('pin "ac" ignored: an audio.cpp row does not serve this model',),
        ),
    ],
)
def test_audiocpp_views(
    view: str, cls: str, pin: str | None, row_id: str, notes: tuple[str, ...]
) -> None:
    res = resolve(AUDIO, ModelOverride(backend=pin), cls, view=view)  # type: ignore[arg-type]
    assert res.row is not None and res.row.id == row_id
    assert res.notes == notes


def test_audiocpp_only_registry_falls_back_for_parakeet() -> None:
    s = settings(row("ac", "audiocpp", default=True))
    res = resolve(s, ModelOverride(), "asr", view="without_audiocpp")
    assert res.row is None and res.exe == "parakeet-server"


def test_embedding_with_vllm_pin_keeps_class_default() -> None:
    s = settings(row("l", "llama", default=True), row("v", "vllm"))
    res = resolve(s, ModelOverride(backend="v"), "llm", embedding=True)
    assert res.row is not None and res.row.id == "l"
    assert res.notes == ('pin "v" ignored: vllm has no embedding emitter; using the class default',)


def test_embedding_never_lands_on_a_vllm_star() -> None:
    s = settings(row("v", "vllm", default=True), row("l", "llama"))
    res = resolve(s, ModelOverride(), "llm", embedding=True)
    assert res.row is not None and res.row.id == "l"


@pytest.mark.parametrize(
    ("rows", "expected"),
    [
        (
            [],
            {
                "server_exe": "llama-server",
                "sd_server_exe": "sd-server",
                "tts_server_exe": "tts-server",
                "asr_server_exe": "parakeet-server",
            },
        ),
        ([row("v", "vllm"), row("a", "llama"), row("b", "llama")], {"server_exe": "/bin/a"}),
        ([row("a", "llama"), row("b", "llama.cpp", default=True)], {"server_exe": "/bin/b"}),
        (
            [row("a", "llama", default=True), row("b", "server", default=True)],
            {"server_exe": "/bin/a"},
        ),
        (
            [row("s", "sd-server"), row("t", "speech"), row("p", "transcribe")],
            {"sd_server_exe": "/bin/s", "tts_server_exe": "/bin/t", "asr_server_exe": "/bin/p"},
        ),
        ([row("k", "kokoro"), row("ac", "audiocpp")], {"tts_server_exe": "tts-server"}),
        (
            [blank_path(row("b", "llama"))],
            {"server_exe": "llama-server"},
        ),
    ],
)
def test_legacy_fallbacks(rows: list[BackendRow], expected: dict[str, str]) -> None:
    got = legacy_fallbacks(Settings(backends=rows))
    assert {k: got[k] for k in expected} == expected


def test_legacy_fallback_keeps_config_value_without_rows() -> None:
    assert legacy_fallbacks(Settings(server_exe="/opt/ls"))["server_exe"] == "/opt/ls"
