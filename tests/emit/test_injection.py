"""YAML injection through names, and configs that say something the plan does not (issue 10, 1).

Every test runs the real CLI over real files whose names, headers or overrides carry
newlines and other control characters, and reads the result back with a YAML parser.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from backendmgr.emit.verify import CAPABILITY_KEYS
from tests.support.cli import Cli, ok
from tests.support.generated import load, output
from tests.support.ggufs import LLAMA3_8B, write_gguf, write_hf
from tests.support.paths import SHARED
from tests.support.realswap import load_once

SCHEMA = SHARED / "llama-swap" / "config-schema.json"
PWN = "m\n  pwn:\n    cmd: touch PWNED_BY_FILENAME\n    x: |\n      .gguf"
HOSTILE_NAMES = [PWN, "a\nb.gguf", "c\rd.gguf", "e\u2028f.gguf", "g\th.gguf", "i\u202ej.gguf"]


def small(path: Path, arch: str = "llama") -> Path:
    return write_gguf(path, arch, layers=2, ctx=4096, embd=256, heads=4, kv_heads=4)


def exe(path: Path) -> str:
    """An executable that exists, so doctor has nothing to say about the rows."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(0o755)
    return str(path)


def configure(config_path: Path, root: Path, extra: str = "", *, vllm: bool = False) -> None:
    bin_dir = config_path.parent.parent / "bin"
    rows = f"  - id: llama-cpu\n    kind: llama\n    path: {exe(bin_dir / 'llama-server')}\n"
    if vllm:
        rows += f"  - id: vllm\n    kind: vllm\n    path: {exe(bin_dir / 'vllm')}\n"
    config_path.parent.mkdir(parents=True, exist_ok=True)
    config_path.write_text(f"models_dirs: [{json.dumps(str(root))}]\nbackends:\n{rows}{extra}")


def check_schema(config_path: Path) -> None:
    import jsonschema

    jsonschema.Draft7Validator(json.loads(SCHEMA.read_text())).validate(load(config_path))
    load_once(output(config_path))


def test_capability_keys_are_the_schemas() -> None:
    schema = json.loads(SCHEMA.read_text())
    model = schema["properties"]["models"]["additionalProperties"]
    assert set(model["properties"]["capabilities"]["properties"]) == CAPABILITY_KEYS


def test_control_characters_in_file_names_are_skipped_not_emitted(
    cli: Cli, tmp_path: Path, config_path: Path
) -> None:
    root = tmp_path / "models"
    good = small(root / "good.gguf")
    for name in HOSTILE_NAMES:
        small(root / name)
    small(root / "bad\ndir" / "inner.gguf")  # the folder, not the file, holds the newline
    small(root / "vision" / "v.gguf")
    small(root / "vision" / "mmproj\nx.gguf", "clip")  # a projector's path lands in cmd
    write_hf(root / "hf\nfolder", LLAMA3_8B)
    configure(config_path, root, vllm=True)

    report = json.loads(ok(cli("--json", "generate")).out)
    data = load(config_path)
    check_schema(config_path)
    assert sorted(data["models"]) == ["good", "v"]
    assert "--mmproj" not in data["models"]["v"]["cmd"]
    assert shlex.split(data["models"]["good"]["cmd"])[1:3] == ["-m", str(good)]
    skipped = {s["id"]: s["reason"] for s in report["skipped"]}
    assert len(skipped) == len(HOSTILE_NAMES) + 3
    for model_id, reason in skipped.items():
        assert model_id.isprintable(), model_id
        assert "holds control character U+" in reason and reason.endswith("; rename it")
    text = output(config_path).read_text(encoding="utf-8")
    assert text.count("# SKIPPED") == len(skipped)
    for line in text.splitlines():  # the hostile text survives only inside comments
        if "PWNED" in line or "pwn" in line:
            assert line.lstrip().startswith("# SKIPPED"), line
    # the check and doctor parse what was written and find it matches the plan
    ok(cli("generate", "--check"))
    ok(cli("doctor"))
    listed = {m["id"]: m for m in json.loads(ok(cli("--json", "models")).out)}
    assert set(listed) == {"good", "v", *skipped}
    pwn_id = next(i for i in skipped if i.startswith("m?"))
    refused = cli("cmd", pwn_id)
    assert refused.code == 1 and "control character U+000A" in refused.err


def test_control_characters_in_headers_and_overrides_stay_inside_scalars(
    cli: Cli, tmp_path: Path, config_path: Path
) -> None:
    """Values that do reach the document (a header's architecture, the user's passthrough
    and extra_args) are escaped by the emitter or flattened into one comment line."""
    root = tmp_path / "models"
    small(root / "good.gguf")
    small(root / "weird.gguf", "llama\n  pwn:\n    cmd: touch PWNED")
    # line breaks only: other controls are refused in a passthrough (yaml.v3, issue 28)
    description = "line one\n  pwn:\n    cmd: touch PWNED\nend"
    extra = '--alias "a\tb" # not a comment'
    configure(
        config_path,
        root,
        "models:\n  good:\n"
        f"    extra_args: {json.dumps(extra)}\n"
        f"    llama_swap: {{description: {json.dumps(description)}, aliases: ['a: b', '#c']}}\n",
    )
    ok(cli("generate"))
    data = load(config_path)
    assert sorted(data["models"]) == ["good", "weird"]
    good = data["models"]["good"]
    assert good["description"] == description and good["aliases"] == ["a: b", "#c"]
    # each word quoted again (issue 28): the same argv, and "#" no comment for llama-swap
    assert good["cmd"].splitlines()[-1] == "--alias 'a\tb' '#' not a comment"
    assert shlex.split(good["cmd"].splitlines()[-1]) == shlex.split(extra)
    check_schema(config_path)
    text = output(config_path).read_text(encoding="utf-8")
    lines = text.splitlines()
    # the architecture reaches the model's comment and its note as one flattened line
    flat = [line for line in lines if "llama? pwn:? cmd: touch PWNED" in line]
    assert flat and all(line.startswith("  # ") for line in flat), flat
    assert all(
        "pwn:" not in line for line in lines if line not in flat and "description" not in line
    )
    ok(cli("generate", "--check"))
    ok(cli("doctor"))


@pytest.mark.parametrize(
    "tamper",
    [
        pytest.param(lambda t: t + "  pwn:\n    cmd: touch PWNED\n", id="extra-model"),
        pytest.param(lambda t: t.replace("-ngl 999", "-ngl 999 --evil"), id="changed-cmd"),
        pytest.param(lambda t: t + "  bad: [\n", id="unparseable"),
        pytest.param(lambda t: t.replace("context: 4096", "context: -1"), id="schema"),
    ],
)
@pytest.mark.parametrize("forget_record", [False, True], ids=["recorded", "no-record"])
def test_a_config_that_differs_from_its_plan_is_a_problem(
    cli: Cli,
    tmp_path: Path,
    config_path: Path,
    tamper: Callable[[str], str],
    forget_record: bool,
) -> None:
    """The header still claims the current inputs, as the old emitter's injected file did:
    doctor and --check must still see the difference. With the record of what was written,
    the change is a hand edit that generate keeps as .bak; without one, a header proves
    nothing (anyone may copy it): the file cannot be confirmed as backendmgr's, which counts
    as a hand edit too, said with the missing record's path, and kept as .bak all the same."""
    root = tmp_path / "models"
    small(root / "good.gguf")
    configure(config_path, root)
    ok(cli("generate"))
    path = output(config_path)
    tampered = tamper(path.read_text(encoding="utf-8"))
    path.write_text(tampered, encoding="utf-8")
    records = list((tmp_path / "home" / "generated").glob("*.sha256"))
    if forget_record:
        for record in records:
            record.unlink()
    doctor = cli("doctor")
    assert doctor.code == 1 and "llama-swap config" in doctor.err, doctor
    check = cli("generate", "--check")
    says = (
        f"may have been modified since backendmgr wrote it ({records[0]} is missing)"
        if forget_record
        else "was modified since backendmgr wrote it"
    )
    assert check.code == 1 and says in check.err, check
    assert check.err.count("\n") == 1 and check.err.startswith("error: "), check
    report = json.loads(ok(cli("--json", "generate")).out)
    assert Path(report["backup"]).read_text(encoding="utf-8") == tampered
    assert report["written"] is True
    ok(cli("generate", "--check"))
    ok(cli("doctor"))
    assert sorted(load(config_path)["models"]) == ["good"]


def test_a_document_that_breaks_the_schema_is_never_written(
    cli: Cli, tmp_path: Path, config_path: Path
) -> None:
    """generate checks what it is about to write: a passthrough of the wrong type is one
    error line and no file, not a config llama-swap would refuse."""
    root = tmp_path / "models"
    small(root / "good.gguf")
    configure(config_path, root, "models:\n  good:\n    llama_swap: {ttl: soon}\n")
    failed = cli("generate")
    assert failed.code == 1 and failed.err.startswith("error: "), failed
    assert "ttl is not an integer" in failed.err and failed.err.count("\n") == 1
    assert not output(config_path).exists()


def test_a_hand_made_alias_bomb_in_the_output_is_one_problem(
    cli: Cli, tmp_path: Path, config_path: Path
) -> None:
    """doctor and --check read a file the user may have edited: bounded like the config."""
    root = tmp_path / "models"
    small(root / "good.gguf")
    configure(config_path, root)
    ok(cli("generate"))
    path = output(config_path)
    lines = ["a: &a [x, x, x, x, x, x, x, x, x, x]"]
    lines += [
        f"{c}: &{c} [{', '.join([f'*{p}'] * 10)}]"
        for p, c in zip("abcdefgh", "bcdefghi", strict=True)
    ]
    path.write_text(path.read_text(encoding="utf-8") + "\n".join(lines) + "\n", encoding="utf-8")
    for argv in (("doctor",), ("generate", "--check")):
        result = cli(*argv)
        assert result.code == 1, result
        assert "aliases expand to more than" in result.err or "modified" in result.err, result
    doctor = cli("doctor")
    assert "aliases expand to more than 200000 values" in doctor.err, doctor


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("aZ09_@%+=:,./-é$ {}'\"\\\n\t")), max_size=12))
def test_a_plain_word_is_written_as_it_is_and_any_other_is_quoted_as_before(word: str) -> None:
    """``render_token``'s shortcut for words ``shlex.quote`` leaves alone gives the text the
    quoting would (:func:`backendmgr.emit.macros.shell_word`), and a shell split gives back
    the word."""
    from backendmgr.emit.macros import shell_word
    from backendmgr.emit.plan import render_token

    assert render_token(word) == shell_word(word)
    assert shlex.split(render_token(word)) == [word]
