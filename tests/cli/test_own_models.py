"""Issue 33 (1): your own models through the CLI: ``models add-dir`` / ``remove-dir`` edit
``models_dirs`` (validated, atomic, ``--dry-run``), and the empty-folder warning says how."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.cli import CliResult, error_line, ok, run_in_process
from tests.support.ggufs import write_gguf

GIB = 1 << 30


def bm(*args: str) -> CliResult:
    return run_in_process(*args)


def test_the_empty_warning_names_the_file_and_the_command(config_path: Path) -> None:
    config_path.parent.mkdir(parents=True)
    config_path.write_text("ttl: 600\n")
    result = ok(bm("models"))
    assert f"models_dirs in {config_path} is empty" in result.err
    assert '"backendmgr models add-dir PATH"' in result.err


def test_add_dir_finds_the_models_and_remove_dir_forgets_them(
    tmp_path: Path, config_path: Path
) -> None:
    root = tmp_path / "mine"
    write_gguf(root / "qwen3-8b-q4_k_m.gguf", "qwen3", layers=36, ctx=40960, size_bytes=GIB)
    config_path.parent.mkdir(parents=True)
    config_path.write_text("# my settings\nttl: 600\n")

    dry = json.loads(ok(bm("models", "add-dir", "--json", "--dry-run", str(root))).out)
    assert dry["dry_run"] is True and dry["changed"] is True
    assert dry["models_dirs"] == [str(root)] and "+models_dirs:" in dry["diff"]
    assert config_path.read_text() == "# my settings\nttl: 600\n"

    done = json.loads(ok(bm("--json", "models", "add-dir", str(root))).out)
    assert done["changed"] is True and done["config"] == str(config_path)
    assert done["models_dirs"] == [str(root)]
    assert config_path.read_text().startswith("# my settings\n")  # an edit, not a rewrite
    listed = json.loads(ok(bm("--json", "models")).out)
    assert [m["id"] for m in listed] == ["qwen3-8b-q4_k_m"]

    again = ok(bm("models", "add-dir", str(root / ".")))  # the same folder, written otherwise
    assert "is already in models_dirs" in again.out

    gone = ok(bm("models", "remove-dir", str(root)))
    assert f"removed {root} from models_dirs in {config_path}" in gone.out
    assert json.loads(ok(bm("--json", "models")).out) == []


def test_add_dir_refuses_what_is_not_a_folder(tmp_path: Path, config_path: Path) -> None:
    afile = tmp_path / "a.gguf"
    afile.write_text("x")
    for path in (str(tmp_path / "nope"), str(afile)):
        line = error_line(bm("models", "add-dir", path), 2)
        assert path in line
    assert not config_path.exists()  # nothing written
    line = error_line(bm("models", "remove-dir", str(tmp_path / "nope")), 2)
    assert "is not in models_dirs" in line


def test_doctor_reports_settings_for_models_no_folder_has(
    tmp_path: Path, config_path: Path
) -> None:
    """Issue 33 (2): a pin or setting saved for an id that does not exist warns when typed, and
    doctor, the place one looks later, reports it; ``--fix`` removes it, a line per model."""
    root = tmp_path / "mine"
    write_gguf(root / "qwen3-8b-q4_k_m.gguf", "qwen3", layers=36, ctx=40960, size_bytes=GIB)
    ok(bm("models", "add-dir", str(root)))
    saved = ok(bm("set", "qwen3-8b", "ctx=4096"))
    assert "did you mean qwen3-8b-q4_k_m?" in saved.err
    ok(bm("set", "qwen3-8b-q4_k_m", "ctx=8192"))  # a model that exists: no problem

    found = bm("doctor")
    assert found.code == 1
    assert (
        'error: settings for "qwen3-8b" (ctx) match no model in models_dirs (doctor --fix '
        "removes them); did you mean qwen3-8b-q4_k_m?"
    ) in found.err.splitlines()
    assert 'qwen3-8b-q4_k_m" (' not in found.err

    moved = tmp_path / "unmounted"  # a folder that cannot be scanned: nothing is removed
    root.rename(moved)
    kept = json.loads(bm("--json", "doctor", "--fix").out)
    assert not any("removed the settings" in line for line in kept["fixed"])
    assert any("kept the settings of undiscovered models" in p for p in kept["problems"])
    moved.rename(root)

    fixed = json.loads(ok(bm("--json", "doctor", "--fix")).out)
    assert 'removed the settings of "qwen3-8b" (ctx): no models folder has it' in fixed["fixed"]
    assert "qwen3-8b:" not in config_path.read_text()
    assert "qwen3-8b-q4_k_m:" in config_path.read_text()


def test_every_change_says_what_it_changed(tmp_path: Path, config_path: Path) -> None:
    """Issue 33 (3): the config file written, the generated file rewritten and the models whose
    entries changed in it, in the text and in ``--json``; nothing when nothing changed."""
    root = tmp_path / "mine"
    write_gguf(root / "qwen3-8b-q4_k_m.gguf", "qwen3", layers=36, ctx=40960, size_bytes=GIB)
    write_gguf(root / "llama-3.2-3b-q8_0.gguf", "llama", layers=28, ctx=8192, size_bytes=GIB)
    config_path.parent.mkdir(parents=True)
    config_path.write_text(
        f"models_dirs: [{json.dumps(str(root))}]\n"
        "backends:\n  - {id: llama-src, kind: llama, path: /bin/true}\n"
    )
    output = Path(json.loads(ok(bm("--json", "generate")).out)["output"])

    said = ok(bm("set", "qwen3-8b-q4_k_m", "ctx=4096")).out.splitlines()
    assert said[1:] == [f"  updated {config_path}", f"  rewrote {output} (qwen3-8b-q4_k_m)"]
    done = json.loads(ok(bm("--json", "pin", "llama-3.2-3b-q8_0", "llama-src")).out)
    assert done["changes"]["config"] == str(config_path)
    # the pin names the row every model already resolves to: the entry itself is the same
    assert done["changes"]["generated"]["output"] == str(output)
    again = json.loads(ok(bm("--json", "set", "qwen3-8b-q4_k_m", "ctx=4096")).out)
    assert again["changed"] is False and "changes" not in again
    dry = json.loads(ok(bm("--json", "unset", "--dry-run", "qwen3-8b-q4_k_m", "ctx")).out)
    assert "changes" not in dry
    gone = json.loads(ok(bm("--json", "models", "remove-dir", str(root))).out)
    assert gone["changes"]["generated"]["models"] == ["llama-3.2-3b-q8_0", "qwen3-8b-q4_k_m"]
