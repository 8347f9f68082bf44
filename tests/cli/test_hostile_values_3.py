"""Hostile values a third pass found, through the real CLI: a models folder linking to ``/``
or naming ``/proc/self`` (the walk read the whole file system on every command), a card size
of ``inf``, settings past what their reader takes (``ctx`` past llama.cpp's int32, ``ctx:
true``), an integer of more digits than Python converts, and two release tags that share one
build folder (``b100+evil`` and ``b100_evil``)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from backendmgr.discovery import files
from tests.support.archives import llama_entries, make_tar
from tests.support.cli import Cli
from tests.support.ggufs import write_gguf
from tests.support.releases import LLAMA_REPO, publish

MIB = 1 << 20


def _models(tmp_path: Path, config_path: Path) -> Path:
    """A config whose models folder holds ``a.gguf``; the folder."""
    models = tmp_path / "models"
    models.mkdir()
    write_gguf(models / "a.gguf", "llama", layers=2, ctx=4096, size_bytes=MIB)
    config_path.parent.mkdir(parents=True, exist_ok=True)
    output = tmp_path / "out" / "ls.yaml"
    config_path.write_text(
        f"models_dirs: [{json.dumps(str(models))}]\noutput: {json.dumps(str(output))}\n"
    )
    return models


# --- the models-folder walk ----------------------------------------------------------------


def test_a_link_to_the_root_is_a_cycle_not_the_whole_disk(
    tmp_path: Path, config_path: Path, cli: Cli
) -> None:
    """``ln -s / everything`` in a models folder: the folder holding the root is the root's
    own ancestor, a cycle; reading it walked every file on the machine (minutes) and found
    every ``config.json`` there."""
    models = _models(tmp_path, config_path)
    (models / "everything").symlink_to("/")
    (models / "up").symlink_to(tmp_path)  # the parent of the models folder: a cycle too
    start = time.monotonic()
    result = cli("models", "--json")
    assert result.code == 0, result.err
    assert time.monotonic() - start < 30
    ids = [m["id"] for m in json.loads(result.out)]
    assert ids == ["a"]
    walked = [folder for folder, _ in files.walk_model_files([str(models)])]
    assert walked == [str(models)]


def test_a_models_folder_on_proc_is_not_read(tmp_path: Path, config_path: Path, cli: Cli) -> None:
    """``models_dirs: [/proc/self]``: ``/proc/self/root`` is ``/``, and /proc, /sys and /dev
    hold no model; the other folders' models still count."""
    if not os.path.isdir("/proc/self"):
        pytest.skip("no /proc here")
    models = _models(tmp_path, config_path)
    dirs = [str(models), "/proc/self", "/sys", "/dev"]
    config_path.write_text(f"models_dirs: {json.dumps(dirs)}\n")
    walked = [folder for folder, _ in files.walk_model_files(dirs)]
    assert walked == [str(models)]
    result = cli("models", "--json")
    assert result.code == 0, result.err
    assert [m["id"] for m in json.loads(result.out)] == ["a"]


def test_a_walk_past_its_bounds_stops_with_one_warning(
    tmp_path: Path, config_path: Path, cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A models folder of more names (or deeper folders) than the bounds: the walk stops
    there with one line naming the folder and the bound, and the models found so far count."""
    models = _models(tmp_path, config_path)
    deep = models / "x" / "y" / "z"
    deep.mkdir(parents=True)
    write_gguf(deep / "deep.gguf", "llama", layers=2, ctx=4096, size_bytes=MIB)
    monkeypatch.setattr(files, "MAX_WALK_DEPTH", 2)
    result = cli("models", "--json")
    assert result.code == 0, result.err
    assert [m["id"] for m in json.loads(result.out)] == ["a"]
    assert result.err == (
        f"warning: stopped reading the models folder {str(models)!r}: "
        "folders nested deeper than 2 levels not read\n"
    )
    # a warning of the command's like any other: -q hides it, generate's result carries it
    assert cli("-q", "models").err == ""
    written = cli("generate", "--json")
    assert written.code == 0, written.err
    assert json.loads(written.out)["warnings"] == [
        f"stopped reading the models folder {str(models)!r}: "
        "folders nested deeper than 2 levels not read"
    ]
    monkeypatch.setattr(files, "MAX_WALK_DEPTH", 32)
    for i in range(5):
        (models / f"d{i}").mkdir()
    monkeypatch.setattr(files, "MAX_WALK_NAMES", 3)
    result = cli("models", "--json")
    assert result.code == 0, result.err
    assert [m["id"] for m in json.loads(result.out)] == ["a"]  # read in the first folder
    assert result.err == (
        f"warning: stopped reading the models folder {str(models)!r}: "
        "more than 3 files and folders; name the folders of models\n"
    )


# --- BACKENDMGR_VRAM_GB --------------------------------------------------------------------


@pytest.mark.parametrize("value", ["inf", "1e999", "9" * 5000, "nan", "-1", "0", "abc"])
def test_a_card_size_that_is_no_size_is_an_error(
    tmp_path: Path, config_path: Path, cli: Cli, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    """``inf`` made every model "cannot size this model (OverflowError)" and ``generate``
    wrote a config of no model, exit 0; ``nan``, ``-1``, ``abc``, ``0`` were ignored."""
    _models(tmp_path, config_path)
    monkeypatch.setenv("BACKENDMGR_VRAM_GB", value)
    result = cli("generate")
    assert result.code == 1
    assert result.err == (
        f'error: BACKENDMGR_VRAM_GB "{value[:40]}" is not a size in GiB '
        "(more than 0, at most 1048576)\n"
    )
    assert not (tmp_path / "out" / "ls.yaml").exists()


# --- settings past what their reader takes -------------------------------------------------


@pytest.mark.parametrize(
    ("setting", "problem"),
    [
        ("ctx=" + "9" * 4000, "ctx: Input should be less than or equal to 2147483647"),
        (f"ctx={2**70}", "ctx: Input should be less than or equal to 2147483647"),
        (f"ctx={2**31}", "ctx: Input should be less than or equal to 2147483647"),
        (
            f"vllm_tensor_parallel={2**64}",
            "vllm_tensor_parallel: Input should be less than or equal to 1024",
        ),
        ("vram_target_gb=1e400", "vram_target_gb: Input should be less than or equal to 1048576"),
    ],
)
def test_set_refuses_a_number_past_its_top(
    tmp_path: Path, config_path: Path, cli: Cli, setting: str, problem: str
) -> None:
    """A 4000-digit ``ctx`` was stored, then the model dropped ("cannot size this model")
    while doctor said consistent; ``ctx=2**70`` was written as ``-c 1180591620717411303424``."""
    _models(tmp_path, config_path)
    before = config_path.read_bytes()
    result = cli("set", "a", setting)
    assert result.code == 2
    assert result.err == f"error: {problem}\n"
    assert config_path.read_bytes() == before
    assert cli("set", "a", f"ctx={2**31 - 1}").code == 0  # the top itself is a context


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ("  a: {ctx: true}", "models.a.ctx: Input should be a number, not true or false"),
        ("  a: {vram_target_gb: true}", "models.a.vram_target_gb: Input should be a number"),
        (f"  a: {{ctx: {2**70}}}", "models.a.ctx: Input should be less than or equal to"),
        ("  a: {vllm_tensor_parallel: 1025}", "Input should be less than or equal to 1024"),
    ],
)
def test_a_hand_written_number_past_its_top_names_the_line(
    tmp_path: Path, config_path: Path, cli: Cli, line: str, problem: str
) -> None:
    """``ctx: true`` became ``-c 1`` (a boolean is an int to Python and to lax pydantic)."""
    _models(tmp_path, config_path)
    config_path.write_text(config_path.read_text() + f"models:\n{line}\n")
    result = cli("cmd", "a")
    assert result.code == 1
    assert result.err.startswith(f"error: {config_path} line 4: ")
    assert problem in result.err
    assert result.err.count("\n") == 1


@pytest.mark.parametrize(
    "line",
    [
        "ttl: 31536001",
        "health_check_timeout: 86401",
        "vram_budget_gb: .inf",
        "max_unpacked_gb: 1048577",
        "ttl: true",
    ],
)
def test_every_number_of_the_settings_has_a_top(
    tmp_path: Path, config_path: Path, cli: Cli, line: str
) -> None:
    _models(tmp_path, config_path)
    config_path.write_text(config_path.read_text() + f"{line}\n")
    result = cli("models")
    assert result.code == 1
    assert result.err.startswith(f"error: {config_path} line 3: {line.split(':')[0]}: Input")


# --- integers Python does not convert ------------------------------------------------------


@pytest.mark.parametrize("command", [("models",), ("set", "a", "ctx=4096"), ("doctor",)])
def test_an_integer_of_thousands_of_digits_names_the_file_and_line(
    tmp_path: Path, config_path: Path, cli: Cli, command: tuple[str, ...]
) -> None:
    """Every command said "internal error: ValueError" (Python converts no integer of more
    than 4300 digits); the check sees the parser's scalars, both loaders' parser."""
    _models(tmp_path, config_path)
    config_path.write_text(config_path.read_text() + "ttl: " + "9" * 5000 + "\n")
    before = config_path.read_bytes()
    result = cli(*command)
    assert result.code == 1
    assert result.err == (
        f"error: {config_path} line 3: a number of more than 4300 digits; "
        "no value backendmgr reads is one\n"
    )
    assert config_path.read_bytes() == before


def test_quoted_digits_are_text_and_long_floats_convert(
    tmp_path: Path, config_path: Path, cli: Cli
) -> None:
    """Only a plain scalar of decimal digits is an integer to the loader: quoted, it is text
    (refused by the field's type), and a float of any length converts."""
    _models(tmp_path, config_path)
    base = config_path.read_text()
    config_path.write_text(base + 'ttl: "' + "9" * 5000 + '"\n')
    result = cli("models")
    assert result.code == 1
    assert "line 3: ttl:" in result.err
    config_path.write_text(base + "vram_budget_gb: 0." + "1" * 5000 + "\n")
    assert cli("models").code == 0


# --- two release tags, one build folder ----------------------------------------------------


def test_two_tags_of_one_build_folder_are_never_each_other(
    tmp_path: Path, config_path: Path, cli: Cli, mirror_root: Path, mirror: object
) -> None:
    """``b100+evil`` and ``b100_evil`` are both the folder ``b100_evil-cpu``: installing the
    second said "already installed and activated", exit 0, over the first's files."""
    _models(tmp_path, config_path)
    asset = {"llama-b100-bin-ubuntu-x64.tar.gz": make_tar(llama_entries("b100"))}
    for tag in ("b100+evil", "b100_evil"):  # assets named as the release's build number
        publish(mirror_root, LLAMA_REPO, tag, asset)
    first = cli("install", "llama-server", "b100+evil", "--variant", "cpu", "--no-smoke")
    assert first.code == 0, first.err
    folder = tmp_path / "home" / "builds" / "llama-server" / "b100_evil-cpu"
    receipt = (folder / ".backendmgr.json").read_bytes()
    for extra in ((), ("--reinstall",), ("--dry-run",)):
        second = cli("install", "llama-server", "b100_evil", "--variant", "cpu", *extra)
        assert second.code == 1, second.err
        assert second.err.splitlines()[-1] == (
            f"error: llama-server@b100_evil-cpu would use the build folder {folder}, which "
            "holds llama-server@b100+evil-cpu: the two names share one folder; uninstall "
            "llama-server@b100+evil-cpu first"
        )
        assert (folder / ".backendmgr.json").read_bytes() == receipt
    listed = cli("list", "--json")
    assert [b["id"] for b in json.loads(listed.out)] == ["llama-server@b100+evil-cpu"]
