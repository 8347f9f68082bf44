"""What stands where backendmgr writes, and what names the models folder holds, are inputs too:
a FIFO or a device at the llama-swap config's path (or a link to one) is refused and left as
it is, never replaced by a file; a file or folder name that is not UTF-8 is skipped with a
reason, and every other model is still written."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from tests.support.cli import Cli, run_backendmgr
from tests.support.ggufs import write_gguf

MIB = 1 << 20


def setup(tmp_path: Path, config_path: Path) -> Path:
    """A config with one llama row and one models folder holding ``ok.gguf``; the output's
    path."""
    models = tmp_path / "models"
    models.mkdir()
    write_gguf(models / "ok.gguf", "llama", layers=2, ctx=4096, size_bytes=MIB)
    config_path.parent.mkdir(parents=True, exist_ok=True)
    doc = {
        "models_dirs": [str(models)],
        "backends": [{"id": "mine", "kind": "llama", "path": "/bin/true"}],
    }
    config_path.write_text(json.dumps(doc))  # JSON is YAML
    return config_path.parent / "llama-swap.yaml"


def test_a_fifo_behind_a_link_is_refused_and_left_a_fifo(
    tmp_path: Path, config_path: Path, cli: Cli
) -> None:
    """A FIFO at the output's path is refused and kept (tests/config/test_hostile_config.py);
    behind a link too, and the link stays."""
    output = setup(tmp_path, config_path)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    output.symlink_to(fifo)
    result = cli("generate")
    assert result.code != 0
    assert f"{output} (a link to {fifo}) is a FIFO" in result.err
    assert "backendmgr replaces only regular files" in result.err
    assert "Traceback" not in result.err
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    assert output.is_symlink()
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def _device(where: Path) -> Path:
    """A character device with the null device's numbers, which only root may make."""
    try:
        os.mknod(where, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("making a device node needs root")
    return where


def test_a_device_named_as_the_output_is_never_replaced(
    tmp_path: Path, config_path: Path, cli: Cli
) -> None:
    """``--output /dev/null`` as root once replaced the system's null device with a file."""
    setup(tmp_path, config_path)
    device = _device(tmp_path / "null")
    result = cli("generate", "--output", str(device))
    assert result.code != 0
    assert f"{device} is a character device" in result.err
    assert stat.S_ISCHR(device.lstat().st_mode)


def test_a_device_behind_a_link_is_never_replaced(
    tmp_path: Path, config_path: Path, cli: Cli
) -> None:
    """The case that replaced a machine's ``/dev/zero`` with a YAML file: a device of our own
    making here (the null device's numbers), which only root may make."""
    output = setup(tmp_path, config_path)
    device = _device(tmp_path / "null")
    output.symlink_to(device)
    result = cli("generate", "--force")
    assert result.code != 0
    assert "is a character device" in result.err
    assert stat.S_ISCHR(device.stat().st_mode)
    assert os.major(device.stat().st_rdev) == 1


def test_a_folder_at_the_output_is_said_in_one_line(
    tmp_path: Path, config_path: Path, cli: Cli
) -> None:
    output = setup(tmp_path, config_path)
    output.mkdir()
    result = cli("generate")
    assert result.code != 0
    assert f"{output} is a folder" in result.err
    assert output.is_dir()


def test_names_that_are_not_utf8_are_skipped_and_the_rest_is_written(
    tmp_path: Path, config_path: Path, cli: Cli
) -> None:
    """Such names once crashed every generate (the inputs' hash encoded them as text)."""
    output = setup(tmp_path, config_path)
    models = tmp_path / "models"
    write_gguf(tmp_path / "plain.gguf", "llama", layers=2, size_bytes=MIB)
    (tmp_path / "plain.gguf").rename(os.fsdecode(bytes(models) + b"/bad\xff\xfex.gguf"))
    hf = Path(os.fsdecode(bytes(models) + b"/hf\xffbad"))
    hf.mkdir()
    (hf / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"]}))
    (hf / "model.safetensors").write_bytes(b"\0" * 64)
    result = cli("generate")
    assert result.code == 0, result.err
    text = output.read_text()
    assert "\n  ok:\n" in text
    assert text.count("path holds control character U+DCFF; rename it") == 2
    again = cli("--json", "models")
    assert again.code == 0, again.err
    rows = {m["id"]: m for m in json.loads(again.out)}
    assert "ok" in rows
    assert len(rows) == 3  # the two skipped under printable ids


@pytest.mark.parametrize("value", ["inf", "1e400", "-inf", "nan"])
def test_a_bounded_number_is_finite(
    tmp_path: Path, config_path: Path, cli: Cli, value: str
) -> None:
    """``vram_target_gb=inf`` was kept, and the model then could not be sized at all."""
    setup(tmp_path, config_path)
    before = config_path.read_bytes()
    result = cli("set", "ok", f"vram_target_gb={value}")
    assert result.code == 2, result.err
    assert result.err.startswith("error: vram_target_gb: Input should be")
    assert config_path.read_bytes() == before


def test_hand_edits_kept_in_one_second_all_stay(
    tmp_path: Path, config_path: Path, cli: Cli
) -> None:
    """Each hand edit is kept as a copy before the file is rewritten; the copies of edits
    made within one second once shared a stamped name, and all but the last were lost."""
    output = setup(tmp_path, config_path)
    assert cli("generate").code == 0
    for n in range(5):
        with output.open("a") as fh:
            fh.write(f"# hand edit {n}\n")
        result = cli("generate")
        assert result.code == 0, result.err
        assert "modified by hand" in result.err
    kept = [p.read_text() for p in output.parent.glob("llama-swap.yaml*.bak")]
    assert len(kept) == 5
    for n in range(5):
        assert sum(f"# hand edit {n}\n" in text for text in kept) == 1


def test_an_alias_named_twice_skips_its_model_not_the_file(
    tmp_path: Path, config_path: Path, cli: Cli
) -> None:
    """llama-swap refuses a whole file in which one model names an alias twice ("duplicate
    alias x found in model: ok"); the check before writing used to pass it."""
    output = setup(tmp_path, config_path)
    write_gguf(tmp_path / "models" / "other.gguf", "llama", layers=2, size_bytes=MIB)
    result = cli("set", "ok", "llama_swap={aliases: [x, x]}")
    assert result.code == 0, result.err
    text = output.read_text()
    assert (
        '# SKIPPED "ok": llama-swap would refuse it: duplicate alias x found in model: ok' in text
    )
    assert "\n  other:\n" in text
    assert "aliases" not in text


def test_a_huge_whole_number_is_no_internal_error(config_path: Path, cli: Cli) -> None:
    """The finite check is a float's: a 400-digit ``ctx`` in a hand-written config has no
    float to be (converting it raised OverflowError at every read); it is now past ``ctx``'s
    top (llama.cpp's int32), so the config does not load, naming the line."""
    config_path.parent.mkdir(parents=True, exist_ok=True)
    config_path.write_text(f"models:\n  m:\n    ctx: {10**400}\n")
    result = cli("list")
    assert result.code == 1, result.err
    assert "internal error" not in result.err
    assert result.err == (
        f"error: {config_path} line 3: models.m.ctx: "
        "Input should be less than or equal to 2147483647\n"
    )


def test_a_pipe_behind_dev_stdout_is_refused_in_one_line(tmp_path: Path, config_path: Path) -> None:
    """``/dev/stdout`` is a link to ``/proc/self/fd/1``, which names a pipe but resolves to no
    path: its folder once got the temporary file's error instead of this refusal."""
    setup(tmp_path, config_path)
    result = run_backendmgr(
        "generate", "--output", "/dev/stdout", env={"BACKENDMGR_CONFIG": str(config_path)}
    )
    assert result.returncode == 1
    assert "/dev/stdout (a link to " in result.stderr
    assert "is a FIFO; backendmgr replaces only regular files" in result.stderr
    assert "No such file" not in result.stderr and "Traceback" not in result.stderr


def test_relative_paths_in_the_config_are_the_configs_own(
    tmp_path: Path, config_path: Path, cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A hand-written ``output: rel/ls.yaml`` and ``models_dirs: [models]`` once meant a
    different file and folder in every working folder (``up`` run elsewhere served another)."""
    config_path.parent.mkdir(parents=True, exist_ok=True)
    write_gguf(config_path.parent / "models" / "ok.gguf", "llama", layers=2, ctx=4096)
    doc = {
        "models_dirs": ["models"],
        "output": "rel/ls.yaml",
        "backends": [{"id": "mine", "kind": "llama", "path": "/bin/true"}],
    }
    config_path.write_text(json.dumps(doc))
    for where in ("w1", "w2"):
        (tmp_path / where).mkdir()
        monkeypatch.chdir(tmp_path / where)
        result = cli("generate", "--force")
        assert result.code == 0, result.err
        assert f"wrote {config_path.parent / 'rel' / 'ls.yaml'}: 1 models" in result.out
        assert not (tmp_path / where / "rel").exists()
    # the entry as written, and the folder it means, both name it for remove-dir
    assert cli("models", "add-dir", str(config_path.parent / "models")).code == 0
    assert json.loads(config_path.read_text())["models_dirs"] == ["models"]
    assert cli("models", "remove-dir", "models").code == 0


def test_an_output_under_a_file_says_the_file_is_no_folder(
    tmp_path: Path, config_path: Path, cli: Cli
) -> None:
    """Not the kernel's "File exists (…)": which path is a file, and that it must be a folder."""
    setup(tmp_path, config_path)
    blocker = tmp_path / "afile"
    blocker.write_text("mine")
    doc = json.loads(config_path.read_text())
    config_path.write_text(json.dumps({**doc, "output": str(blocker / "sub" / "ls.yaml")}))
    result = cli("generate")
    assert result.code == 1 and "Traceback" not in result.err
    assert f"error: {blocker} is a file, not a folder: the llama-swap config" in result.err
    assert blocker.read_text() == "mine"
