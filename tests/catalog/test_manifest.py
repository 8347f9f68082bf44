from __future__ import annotations

from pathlib import Path

import pytest

from backendmgr.catalog.files import builtin_manifest_dir, read_manifest
from backendmgr.catalog.manifest import (
    Manifest,
    load_catalog,
    parse_manifest,
    pypi_variants_install_anywhere,
)
from backendmgr.errors import ConfigError
from backendmgr.record import plain, validate


def test_builtin_manifests_load() -> None:
    catalog = load_catalog()
    assert catalog.ids() == ["llama-server", "llama-swap", "sd-server", "upscaler", "vllm"]
    llama = catalog.get("llama-server")
    assert llama is not None and llama.kind == "llama"
    assert (
        llama.exe_for("windows") == "llama-server.exe" and llama.exe_for("linux") == "llama-server"
    )
    assert [v.id for v in llama.variants_on("linux-x64")] == [
        "cpu",
        "cuda",
        "vulkan",
        "rocm",
        "sycl",
        "openvino",
    ]
    vllm = catalog.get("vllm")
    assert vllm is not None and vllm.source.type == "pypi"


def write(folder: Path, name: str, text: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(text)


GOOD = """id: mytool
kind: custom
source: {type: github, repo: me/mytool}
exe: {default: mytool}
variants: [{id: cpu, assets: {linux-x64: ['mytool-.*\\.tar\\.gz']}}]
"""


def test_user_manifest_is_added(tmp_path: Path) -> None:
    write(tmp_path, "mytool.yaml", GOOD)
    assert [m.id for m in load_catalog(tmp_path)][-1] == "mytool"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (GOOD.replace("mytool\nkind", "vllm\nkind"), 'component id "vllm" is already defined'),
        (GOOD.replace("me/mytool", "../etc"), "field source.github.repo: repo must look like"),
        (GOOD.replace("linux-x64", "linux-x86"), "unknown platform 'linux-x86'"),
        (GOOD.replace("mytool-.*", "mytool-(["), "bad pattern"),
        (GOOD + "colour: red\n", "field colour: Extra inputs are not permitted"),
        (GOOD.replace("variants: [", "variants: []\n#"), "field variants"),
        ("id: [\n", "manifest"),
    ],
)
def test_bad_user_manifest_names_file_and_field(tmp_path: Path, text: str, message: str) -> None:
    write(tmp_path, "bad.yaml", text)
    with pytest.raises(ConfigError, match=r"bad\.yaml") as info:
        list(load_catalog(tmp_path))
    assert message in str(info.value)


def test_a_kept_parse_serves_the_same_bytes_and_every_manifest_is_still_validated(
    tmp_path: Path,
) -> None:
    """Issue 30: each manifest's parse is kept for its bytes (an input, not an answer): the
    next load reads it instead of the YAML, an edit is parsed again, and validation runs on
    every load."""
    user, cache = tmp_path / "manifests", tmp_path / "cache"
    write(user, "mytool.yaml", GOOD)
    assert [m.id for m in load_catalog(user, cache=cache)][-1] == "mytool"
    kept = list((cache / "manifests").glob("*.json"))
    assert len(kept) == 6  # five built-in manifests and the user's
    for path in kept:  # a kept parse is what is read: a different id in it shows
        path.write_text(path.read_text().replace('"mytool"', '"kepttool"'))
    assert [m.id for m in load_catalog(user, cache=cache)][-1] == "kepttool"
    write(user, "mytool.yaml", GOOD.replace("mytool\nkind", "newtool\nkind"))  # edited
    assert [m.id for m in load_catalog(user, cache=cache)][-1] == "newtool"
    write(user, "mytool.yaml", GOOD + "colour: red\n")
    for _ in range(2):  # refused when parsed, and again when its parse is kept
        with pytest.raises(ConfigError, match="field colour: Extra inputs"):
            list(load_catalog(user, cache=cache))


def test_the_strict_reading_is_pydantics_reading(tmp_path: Path) -> None:
    """Issue 34: a manifest is read strictly first (no pydantic); whatever that accepts must be
    the manifest pydantic makes of the same data, and what it refuses still goes to pydantic
    (its lax reading: ``bare: 1``; its messages: the cases above)."""
    write(tmp_path, "mytool.yaml", GOOD)
    lax = GOOD + "bare: 1\nallow_prerelease: 'true'\n"
    write(tmp_path, "laxtool.yaml", lax.replace("mytool\nkind", "laxtool\nkind"))
    paths = [*sorted(builtin_manifest_dir().glob("*.yaml")), *sorted(tmp_path.glob("*.yaml"))]
    assert len(paths) >= 7
    for path in paths:
        data = read_manifest(path)
        by_pydantic = validate(Manifest, pypi_variants_install_anywhere(data))
        assert plain(parse_manifest(data, str(path))) == plain(by_pydantic)
    laxed = parse_manifest(read_manifest(tmp_path / "laxtool.yaml"), "laxtool")
    assert laxed.bare is True and laxed.allow_prerelease is True
