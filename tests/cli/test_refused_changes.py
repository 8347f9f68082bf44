"""A change the regeneration refuses changes nothing (SPEC §13): the new settings are planned,
rendered and checked, with the generated file's record, before config.yaml is written. A
record that cannot be replaced is refused before any write, named by its real path; a record
that is missing or holds no digest confirms nothing, so a hand edit that kept the generated
header is still reported and kept as .bak."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.cli import Cli
from tests.support.ggufs import write_gguf

MIB = 1 << 20
BAD = "llama_swap={ttl: '007'}"  # a string where llama-swap wants a whole number
INVALID = "the llama-swap config would be invalid: model 'a': ttl is not an integer >= -1"


def home(tmp_path: Path, config_path: Path, models: dict[str, object] | None = None) -> Path:
    """Two models, ``a`` and ``b``, one llama row and the given per-model settings, generated
    once; the output's path."""
    folder = tmp_path / "models"
    for name in ("a", "b"):
        write_gguf(folder / f"{name}.gguf", "llama", layers=2, ctx=4096, size_bytes=MIB)
    config_path.parent.mkdir(parents=True, exist_ok=True)
    doc = {
        "models_dirs": [str(folder)],
        "backends": [{"id": "mine", "kind": "llama", "path": "/bin/true"}],
        "models": models or {},
    }
    config_path.write_text(json.dumps(doc))  # JSON is YAML
    return config_path.parent / "llama-swap.yaml"


def record_of(tmp_path: Path) -> Path:
    (record,) = (tmp_path / "home" / "generated").glob("*.sha256")
    return record


def refused(result: object, *says: str, code: int = 1) -> None:
    """A one-line error that says each of ``says``, and no traceback."""
    err = result.err  # type: ignore[attr-defined]
    assert result.code == code, err  # type: ignore[attr-defined]
    assert err.startswith("error: ") and err.count("\n") == 1, err
    for text in says:
        assert text in err, err


def test_a_set_the_regeneration_refuses_leaves_config_yaml_as_it_was(
    tmp_path: Path, config_path: Path, cli: Cli
) -> None:
    """It once kept the value: every later ``generate`` failed until the user unset it."""
    output = home(tmp_path, config_path)
    assert cli("generate").code == 0
    config, generated = config_path.read_bytes(), output.read_bytes()
    result = cli("set", "a", BAD)
    refused(result, INVALID, f"{config_path} and {output} are unchanged")
    assert config_path.read_bytes() == config
    assert output.read_bytes() == generated
    assert cli("generate", "--check").code == 0
    assert cli("set", "a", "llama_swap={ttl: 7}").code == 0  # the value it can take
    assert "ttl: 7" in output.read_text()


def test_no_generate_and_dry_run_keep_their_behaviour(
    tmp_path: Path, config_path: Path, cli: Cli
) -> None:
    """``--dry-run`` writes nothing; ``--no-generate`` stores what it is given (no rewrite
    checks it), and ``generate`` then says why the file cannot be written."""
    output = home(tmp_path, config_path)
    assert cli("generate").code == 0
    config = config_path.read_bytes()
    dry = cli("set", "a", BAD, "--dry-run")
    assert dry.code == 0, dry.err
    assert config_path.read_bytes() == config
    stored = cli("set", "a", BAD, "--no-generate")
    assert stored.code == 0, stored.err
    assert "'007'" in config_path.read_text()
    refused(cli("generate"), INVALID, f"{output} is unchanged")


CHANGES = [
    pytest.param(("set", "b", "ctx=2048"), id="set"),
    pytest.param(("pin", "b", "mine"), id="pin"),
    pytest.param(("unpin", "b"), id="unpin"),
    pytest.param(("default", "mine"), id="default"),
    pytest.param(("backends", "add", "two", "--kind", "llama", "--path", "/bin/true"), id="add"),
    pytest.param(("models", "add-dir", "{more}"), id="add-dir"),
]


@pytest.mark.parametrize("change", CHANGES)
def test_a_stored_value_that_breaks_the_file_refuses_other_changes(
    tmp_path: Path, config_path: Path, cli: Cli, change: tuple[str, ...]
) -> None:
    """Model a's stored passthrough (a hand edit) makes the whole file invalid: a change to
    anything else is refused, naming a's problem, and writes nothing; unsetting it (the
    change that repairs the state) passes and regenerates."""
    output = home(tmp_path, config_path, {"a": {"llama_swap": {"ttl": "007"}}})
    config = config_path.read_bytes()
    (tmp_path / "more").mkdir()
    args = [arg.format(more=tmp_path / "more") for arg in change]
    refused(cli(*args), INVALID, f"{config_path} and {output} are unchanged")
    assert config_path.read_bytes() == config
    assert not output.exists()
    fixed = cli("unset", "a", "llama_swap")
    assert fixed.code == 0, fixed.err
    assert cli("generate", "--check").code == 0
    assert cli(*args).code == 0


def _folder(where: Path) -> None:
    where.mkdir()
    (where / "inside").write_text("x")


def _link(where: Path) -> None:
    victim = where.with_name("victim")
    victim.write_text("mine\n")
    where.symlink_to(victim)


def _read_only(where: Path) -> None:
    where.chmod(0o444)


RECORDS = [
    pytest.param(_folder, "is a folder", id="folder"),
    pytest.param(_link, "is a symbolic link", id="link"),
    pytest.param(_read_only, "is read-only", id="read-only"),
]


@pytest.mark.parametrize(("spoil", "says"), RECORDS)
@pytest.mark.parametrize("command", [("set", "a", "ctx=2048"), ("generate", "--force")])
def test_a_record_that_cannot_be_replaced_is_refused_before_any_write(
    tmp_path: Path, config_path: Path, cli: Cli, spoil: object, says: str, command: tuple[str, ...]
) -> None:
    """The error came after config.yaml and llama-swap.yaml were rewritten."""
    output = home(tmp_path, config_path)
    assert cli("generate").code == 0
    record = record_of(tmp_path)
    if spoil is not _read_only:
        record.unlink()
    spoil(record)  # type: ignore[operator]
    config, generated = config_path.read_bytes(), output.read_bytes()
    refused(cli(*command), f"error: {record} {says}; ", "nothing was changed")
    assert config_path.read_bytes() == config
    assert output.read_bytes() == generated
    assert [p.name for p in output.parent.iterdir() if ".tmp" in p.name] == []
    if spoil is _link:
        assert record.with_name("victim").read_text() == "mine\n"


@pytest.mark.parametrize("record_is", ["missing", "garbage"])
def test_a_hand_edit_that_kept_the_header_is_found_without_a_record(
    tmp_path: Path, config_path: Path, cli: Cli, record_is: str
) -> None:
    """``generate --check`` once said "up to date": the header matched, and no record said
    otherwise. A record that cannot confirm the file counts as a hand edit."""
    output = home(tmp_path, config_path)
    assert cli("generate").code == 0
    record = record_of(tmp_path)
    if record_is == "missing":
        record.unlink()
        why = f"{record} is missing"
    else:
        record.write_text("not a digest\n")
        why = f"{record} holds no SHA-256"
    edited = output.read_text() + "# my note\n"
    output.write_text(edited)
    refused(cli("generate", "--check"), f"may have been modified since backendmgr wrote it ({why})")
    done = cli("--json", "generate")
    assert done.code == 0, done.err
    report = json.loads(done.out)
    assert Path(report["backup"]).read_text() == edited
    assert f"{output} may have been modified by hand ({why})" in report["warnings"][0]
    assert cli("generate", "--check").code == 0


def test_a_missing_record_of_an_untouched_file_is_not_a_hand_edit(
    tmp_path: Path, config_path: Path, cli: Cli
) -> None:
    """A file holding exactly what generate would write is backendmgr's, record or not (a
    home made anew): no .bak, and the record is written again; a change after that is no
    hand edit either. (A change made first cannot tell, and keeps a .bak.)"""
    output = home(tmp_path, config_path)
    assert cli("generate").code == 0
    record = record_of(tmp_path)
    record.unlink()
    assert cli("generate", "--check").code == 0
    again = cli("generate")
    assert again.code == 0 and again.err == "", again.err
    assert record.is_file()
    done = cli("set", "a", "ctx=2048")
    assert done.code == 0 and done.err == "", done.err
    assert list(output.parent.glob("*.bak")) == []


def test_a_failed_write_of_the_output_puts_config_yaml_back(
    tmp_path: Path, config_path: Path, cli: Cli
) -> None:
    """What no check before the writes foresees (here a read-only llama-swap.yaml, refused
    when it is replaced): the config's old bytes go back under the same lock."""
    output = home(tmp_path, config_path)
    assert cli("generate").code == 0
    config, generated = config_path.read_bytes(), output.read_bytes()
    output.chmod(0o444)
    refused(cli("set", "a", "ctx=2048"), f"{output} is read-only")
    assert config_path.read_bytes() == config
    assert output.read_bytes() == generated
    output.chmod(0o644)
    assert cli("set", "a", "ctx=2048").code == 0
    assert "ctx: 2048" in config_path.read_text() or "2048" in config_path.read_text()


def test_a_file_where_the_records_folder_goes_is_refused_before_any_write(
    tmp_path: Path, config_path: Path, cli: Cli
) -> None:
    output = home(tmp_path, config_path)
    assert cli("generate").code == 0
    folder = tmp_path / "home" / "generated"
    for kept in folder.iterdir():
        kept.unlink()
    folder.rmdir()
    folder.write_text("mine\n")
    config, generated = config_path.read_bytes(), output.read_bytes()
    refused(cli("set", "a", "ctx=2048"), f"error: {folder} is not a folder; ")
    assert config_path.read_bytes() == config
    assert output.read_bytes() == generated
    assert folder.read_text() == "mine\n"
