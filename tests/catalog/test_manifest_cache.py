"""The manifests' kept parse (issue 34): each manifest is parsed once per content, not at every
start; any other bytes are parsed again, and a missing, read-only or linked cache folder only
costs the parse."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from backendmgr.catalog.files import manifest_files
from backendmgr.catalog.ids import component_ids
from backendmgr.catalog.manifest import load_catalog
from backendmgr.errors import ConfigError

GOOD = """id: mytool
kind: custom
source: {type: github, repo: me/mytool}
exe: {default: mytool}
variants: [{id: cpu, assets: {linux-x64: ['mytool-.*\\.tar\\.gz']}}]
"""


def kept(cache: Path) -> list[Path]:
    folder = cache / "manifests"
    return sorted(folder.iterdir()) if folder.is_dir() else []


def read_all(user: Path | None = None, *, cache: Path) -> list[str]:
    """Every manifest's id, each manifest read (a built-in one is read when first asked for)."""
    return [m.id for m in load_catalog(user, cache=cache)]


def homes(tmp_path: Path) -> tuple[Path, Path]:
    """A cache folder, and a user manifest folder holding ``t.yaml`` (:data:`GOOD`)."""
    cache, user = tmp_path / "cache", tmp_path / "m"
    cache.mkdir()
    user.mkdir()
    (user / "t.yaml").write_text(GOOD)
    return cache, user


def test_a_second_start_reads_no_yaml(tmp_path: Path) -> None:
    """The second process reads the kept manifests without importing the YAML parser, and
    neither imports pydantic (issue 30: what backendmgr kept is read back by ``record.load``;
    issue 34: a manifest the strict reader accepts needs no pydantic either)."""
    cache, user = homes(tmp_path)
    script = (
        "import sys; from pathlib import Path; from backendmgr.catalog.manifest import "
        "load_catalog; c = load_catalog(Path(sys.argv[1]), cache=Path(sys.argv[2])); "
        "print([m.id for m in c][-1], 'ruamel.yaml' in sys.modules, 'pydantic' in sys.modules)"
    )
    argv = [sys.executable, "-c", script, str(user), str(cache)]
    first = subprocess.run(argv, capture_output=True, text=True, check=True).stdout.split()
    assert first == ["mytool", "True", "False"]
    assert len(kept(cache)) == 6  # five built-in manifests and the user's
    second = subprocess.run(argv, capture_output=True, text=True, check=True).stdout.split()
    assert second == ["mytool", "False", "False"]


def test_changed_bytes_are_parsed_again(tmp_path: Path) -> None:
    cache, user = homes(tmp_path)
    assert read_all(user, cache=cache)[-1] == "mytool"
    (user / "t.yaml").write_text(GOOD.replace("mytool\nkind", "other\nkind"))
    assert read_all(user, cache=cache)[-1] == "other"
    assert len(kept(cache)) == 6  # the edit replaced the file's kept parse
    (user / "t.yaml").write_text(GOOD + "colour: red\n")  # a kept parse is validated too
    with pytest.raises(ConfigError, match="field colour"):
        list(load_catalog(user, cache=cache))
    # a bad file is refused with or without a kept parse of its earlier bytes
    (user / "t.yaml").write_text("id: [\n")
    with pytest.raises(ConfigError, match=r"t\.yaml"):
        list(load_catalog(user, cache=cache))


def test_a_forged_kept_parse_is_not_believed(tmp_path: Path) -> None:
    """A kept parse is keyed by the manifest's exact bytes: one that says something else of
    other bytes is ignored, parsed again and rewritten."""
    cache, user = homes(tmp_path)
    list(load_catalog(user, cache=cache))
    for path in kept(cache):
        path.write_text(path.read_text().replace('"source": "', '"source": "#'))
        path.write_text(path.read_text().replace('"mytool"', '"forged"'))
    assert read_all(user, cache=cache)[-1] == "mytool"
    assert "forged" not in "".join(p.read_text() for p in kept(cache))


def test_no_data_home_no_write(tmp_path: Path) -> None:
    """A read never creates the data home; in one that exists, the cache folder is made."""
    cache = tmp_path / "home" / "cache"
    assert read_all(cache=cache)[0] == "llama-server"
    assert not (tmp_path / "home").exists()
    (tmp_path / "home").mkdir()
    list(load_catalog(cache=cache))
    assert len(kept(cache)) == 5


def test_a_fifo_is_never_opened(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    list(load_catalog(cache=cache))
    for path in kept(cache):
        path.unlink()
        os.mkfifo(path)
    assert read_all(cache=cache)[0] == "llama-server"  # no hang


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only folder")
def test_read_only_cache_still_loads(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    cache.chmod(0o555)
    try:
        assert read_all(cache=cache)[0] == "llama-server"
    finally:
        cache.chmod(0o755)
    assert kept(cache) == []


def test_an_unwritable_cache_still_loads(tmp_path: Path) -> None:
    """Something else where the kept parses go (as root, a read-only folder is writable)."""
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "manifests").write_text("not a folder")
    assert read_all(cache=cache)[0] == "llama-server"
    assert (cache / "manifests").read_text() == "not a folder"


def test_a_link_is_never_followed(tmp_path: Path) -> None:
    """A link at the cache's manifests folder or at a kept file: nothing is written through it
    or read from it, and the catalog loads."""
    cache, elsewhere = tmp_path / "cache", tmp_path / "elsewhere"
    cache.mkdir()
    elsewhere.mkdir()
    (cache / "manifests").symlink_to(elsewhere)
    assert read_all(cache=cache)[0] == "llama-server"
    assert list(elsewhere.iterdir()) == []
    (cache / "manifests").unlink()
    list(load_catalog(cache=cache))
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    victim.chmod(0o600)
    for path in kept(cache):
        path.unlink()
        path.symlink_to(victim)
    assert read_all(cache=cache)[0] == "llama-server"
    assert victim.read_text() == "keep me" and victim.stat().st_mode & 0o777 == 0o600


def test_completion_reads_kept_parses_and_writes_none(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    assert component_ids(None, cache)[0] == "llama-server"
    assert kept(cache) == []
    list(load_catalog(cache=cache))
    assert component_ids(None, cache) == read_all(cache=cache)


def test_a_kept_manifest_that_is_not_one_is_parsed_again(tmp_path: Path) -> None:
    """What is kept is the validated manifest, read back strictly: a kept document that fails
    that read (a check, a missing or unknown key) is ignored and the YAML validated again."""
    cache, user = homes(tmp_path)
    list(load_catalog(user, cache=cache))
    for path in kept(cache):
        document = json.loads(path.read_text())
        document["document"]["variants"] = []  # at least one variant
        document["document"]["colour"] = "red"
        path.write_text(json.dumps(document))
    catalog = load_catalog(user, cache=cache)
    assert catalog.ids()[-1] == "mytool"
    assert all(manifest.variants for manifest in catalog)


def test_a_command_reads_only_the_manifests_it_needs(tmp_path: Path) -> None:
    """``install vllm`` reads vllm's manifest and the user's (whose ids may not clash with a
    built-in one), not the other four; listing the catalog reads them all, each built-in
    manifest named for its id."""
    cache, user = homes(tmp_path)
    catalog = load_catalog(user, cache=cache)
    assert len(kept(cache)) == 1  # the user's, read at once
    vllm = catalog.get("vllm")
    assert vllm is not None and vllm.id == "vllm"
    assert len(kept(cache)) == 2
    assert catalog.ids() == [*(p.stem for p in manifest_files(None)), "mytool"]
    assert [m.id for m in catalog] == catalog.ids()
    assert len(kept(cache)) == 6
