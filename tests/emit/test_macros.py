"""Issue 28's own examples: every value a user can set ends in a file the real llama-swap loads,
with the value reaching the model process as typed, or is refused at the door with one line."""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path

import pytest

from tests.support.cli import Cli, ok
from tests.support.generated import load, output
from tests.support.ggufs import write_gguf
from tests.support.hostile import all_in_one_group, recorder, serve_all
from tests.support.paths import SHARED
from tests.support.swap import free_start_port, needs_swap

SCHEMA = SHARED / "llama-swap" / "config-schema.json"
NAMES = ["alpha-q4_k_m", "beta-q4_k_m", "gamma-q4_k_m"]
ODD = "m${foo}-q4_k_m"  # a file name that is llama-swap macro syntax


def small(path: Path) -> Path:
    return write_gguf(path, "llama", layers=2, ctx=4096, embd=256, heads=4, kv_heads=4)


def setup(tmp_path: Path, config_path: Path, extra: str = "") -> Path:
    models = tmp_path / "models"
    for name in [*NAMES, ODD]:
        small(models / f"{name}.gguf")
    exe = recorder(tmp_path / "bin" / "llama-server")
    passthrough = json.loads(all_in_one_group(NAMES))
    passthrough["startPort"] = free_start_port()
    config_path.parent.mkdir(parents=True, exist_ok=True)
    config_path.write_text(
        f"models_dirs: [{json.dumps(str(models))}]\n"
        f"backends:\n  - {{id: rec, kind: llama, path: {json.dumps(str(exe))}}}\n"
        f"llama_swap: {json.dumps(passthrough)}\n{extra}"
    )
    return models


def check_schema(config_path: Path) -> None:
    import jsonschema

    jsonschema.Draft7Validator(json.loads(SCHEMA.read_text())).validate(load(config_path))


def refused(cli: Cli, config_path: Path, *args: str) -> str:
    """``backendmgr ARGS`` refuses: exit 2, one ``error:`` line, config byte for byte."""
    before = config_path.read_bytes()
    result = cli(*args)
    assert result.code == 2, (args, result.out, result.err)
    lines = result.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.err
    assert config_path.read_bytes() == before
    return lines[0]


@needs_swap
def test_issue_examples_reach_the_process_or_are_refused(
    cli: Cli, tmp_path: Path, config_path: Path
) -> None:
    models = setup(tmp_path, config_path)
    small(models / "<<.gguf")  # yaml.v3 merges a "<<" key once llama-swap re-encodes its file
    ok(cli("set", "alpha-q4_k_m", "env=HF_ENDPOINT=https://hf.example/api?x=1 'A=why? yes'"))
    ok(cli("set", "beta-q4_k_m", "extra_args=--x ${foo} '#c' 'a: b' -- '$${x}'"))
    ok(cli("set", "gamma-q4_k_m", 'llama_swap={aliases: ["why?", "yes", "- x"]}'))
    ok(cli("generate"))
    check_schema(config_path)
    data = load(config_path)
    assert data["models"]["gamma-q4_k_m"]["aliases"] == ["why?", "yes", "- x"]
    # the odd file is one model among the others, its path a literal in cmd
    assert set(data["models"]) == {*NAMES, ODD}
    assert 'SKIPPED "<<": llama-swap would refuse it' in output(config_path).read_text()
    ids, started = serve_all(output(config_path), tmp_path / "records", dict(os.environ))
    assert ids == {*NAMES, ODD}
    by_model = {argv[argv.index("-m") + 1]: (argv, env) for argv, env in started}
    assert set(by_model) == {str(models / f"{n}.gguf") for n in [*NAMES, ODD]}
    _, alpha_env = by_model[str(models / "alpha-q4_k_m.gguf")]
    assert alpha_env["HF_ENDPOINT"] == "https://hf.example/api?x=1"
    assert alpha_env["A"] == "why? yes"
    beta_argv, _ = by_model[str(models / "beta-q4_k_m.gguf")]
    assert beta_argv[-6:] == ["--x", "${foo}", "#c", "a: b", "--", "$${x}"]
    ok(cli("generate", "--check"))
    ok(cli("doctor"))


@pytest.mark.parametrize(
    "args",
    [
        ["set", "alpha-q4_k_m", "env=D=${foo}"],
        ["set", "alpha-q4_k_m", "env=D=a${x"],  # no macro, but a "${" nothing can escape there
        ["set", "alpha-q4_k_m", "llama_swap={env: [lower=1]}"],
        ["set", "alpha-q4_k_m", 'llama_swap={env: ["A=1\\nB=2"]}'],
        ["set", "alpha-q4_k_m", 'llama_swap={description: "d ${foo}"}'],
        ["set", "alpha-q4_k_m", 'llama_swap={metadata: {"<<": {a: 1}}}'],
        ["set", "alpha-q4_k_m", 'llama_swap={cmd: "x --port ${PORT} ${foo}"}'],
        ["set", "alpha-q4_k_m", "extra_args=--x 'a\nb'"],
        ["set", "alpha-q4_k_m", "vllm_tokenizer=a\u202eb"],
        ["backends", "add", "r${foo}", "--path", "/bin/true", "--kind", "llama"],
    ],
)
def test_values_llama_swap_would_refuse_are_refused_at_the_door(
    cli: Cli, tmp_path: Path, config_path: Path, args: list[str]
) -> None:
    setup(tmp_path, config_path)
    ok(cli("generate"))
    written = output(config_path).read_bytes()
    line = refused(cli, config_path, *args)
    assert "${" in line or "control character" in line or "merge" in line or "env" in line, line
    assert output(config_path).read_bytes() == written


def test_explicit_macros_pass_and_an_unset_variable_is_a_warning(
    cli: Cli, tmp_path: Path, config_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("BM_UNSET_28", raising=False)
    setup(tmp_path, config_path, 'models:\n  alpha-q4_k_m:\n    llama_swap: {macros: {foo: "7"}}\n')
    result = ok(cli("set", "alpha-q4_k_m", "env=D=${foo} E=${env.BM_UNSET_28} P=${PORT}"))
    assert "warning:" in result.err and "BM_UNSET_28" in result.err
    ok(cli("set", "alpha-q4_k_m", "extra_args=--id ${MODEL_ID} --f ${foo} --g ${bar}"))
    cmd = load(config_path)["models"]["alpha-q4_k_m"]["cmd"]
    last = cmd.splitlines()[-1]
    assert last == "--id ${MODEL_ID} --f ${foo} --g $\\{'bar}'"
    assert shlex.split(last)[-1] == "${bar}"
    text = output(config_path).read_text(encoding="utf-8")
    assert '"E=${env.BM_UNSET_28}"' in text  # double-quoted: llama-swap pastes it escaped
    # a hand-edited config is held to the same rule when it is read
    config_path.write_text(config_path.read_text() + '  beta-q4_k_m:\n    env: ["D=${nope}"]\n')
    bad = cli("generate")
    assert bad.code != 0 and "${nope}" in bad.err and len(bad.err.strip().splitlines()) == 1


@needs_swap
def test_doctor_asks_the_real_llama_swap_to_load_the_file(
    cli: Cli, tmp_path: Path, config_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.support.swap import SWAP_BIN

    on_path = tmp_path / "path"
    on_path.mkdir()
    (on_path / "llama-swap").symlink_to(SWAP_BIN)
    monkeypatch.setenv("PATH", f"{on_path}{os.pathsep}{os.environ['PATH']}")
    setup(tmp_path, config_path)
    ok(cli("generate"))
    report = json.loads(ok(cli("--json", "doctor")).out)
    assert any("loads" in n and "4 models" in n for n in report["notes"]), report
    # a hand edit llama-swap refuses: doctor says so in llama-swap's words
    target = output(config_path)
    target.write_text(target.read_text().replace("ttl: 600", "ttl: 600\n    name: x${foo}", 1))
    bad = cli("--json", "doctor")
    assert bad.code != 0
    problems = json.loads(bad.out)["problems"]
    assert any("refuses" in p and "${foo}" in p for p in problems), problems


@needs_swap
def test_a_global_macro_is_a_macro_in_extra_args_and_env(
    cli: Cli, tmp_path: Path, config_path: Path
) -> None:
    setup(tmp_path, config_path)
    text = config_path.read_text().replace(
        '"startPort"', '"macros": {"gm": "--seed 7"}, "startPort"'
    )
    config_path.write_text(text)
    ok(cli("set", "alpha-q4_k_m", "extra_args=${gm} --lit ${nope}", "env=G=${gm}"))
    ok(cli("generate", "--check"))
    ids, started = serve_all(output(config_path), tmp_path / "records", dict(os.environ))
    assert ids == {*NAMES, ODD}
    argv, env = next((a, e) for a, e in started if "alpha-q4_k_m.gguf" in a[a.index("-m") + 1])
    assert argv[-4:] == ["--seed", "7", "--lit", "${nope}"]  # the macro's value is split too
    assert env["G"] == "--seed 7"


def test_the_trial_load_is_bounded_and_leaves_nothing_running(tmp_path: Path) -> None:
    """A llama-swap that never answers (and a child it started) is stopped after the bound;
    3 s, so that a loaded box has started the script's child before the bound ends it."""
    import anyio

    from backendmgr.swap.trial import trial_load
    from tests.support.processes import running

    pids = tmp_path / "pids"
    exe = tmp_path / "llama-swap"
    exe.write_text(f"#!/bin/sh\nsleep 300 &\necho $$ $! > {pids}\nwait\n")
    exe.chmod(0o755)
    verdict = anyio.run(lambda: trial_load(exe, tmp_path / "none.yaml", timeout=3.0))
    assert not verdict.loaded and "did not answer within 3 s" in verdict.detail
    assert not any(running(int(p)) for p in pids.read_text().split())


@pytest.mark.parametrize(
    ("body", "named"),
    [
        ({"cmd": "x --port ${PORT}", "name": "n ${foo}"}, "${foo}"),
        ({"cmd": "x --port ${PORT}", "env": ["A=${foo}"]}, "${foo}"),
        ({"cmd": "x --port ${PORT} ${MODEL_ID}", "metadata": {"k": ["${bar}"]}}, "${bar}"),
        ({"cmd": "x", "proxy": "http://h:${PORT}"}, "${PORT}"),
        ({"cmd": "x --port ${PORT}", "env": ["lower=1"]}, "lower=1"),
        ({"cmd": "x --port ${PORT}", "description": "d" * 1025}, "description"),
    ],
)
def test_a_document_llama_swap_would_refuse_is_named_before_it_is_written(
    body: dict[str, object], named: str
) -> None:
    """The check ``generate`` runs on the emitted text before it replaces a file: the model
    and the value, in one line."""
    from backendmgr.emit.document import document_of, dump
    from backendmgr.emit.verify import check_emitted

    document = document_of({"healthCheckTimeout": 30, "models": {"m-1": body}})
    problems = check_emitted(document, dump(document))
    assert problems and "'m-1'" in problems[0] and named in problems[0], problems


def test_the_quoting_rule_reads_back_in_yaml_1_1_and_1_2() -> None:
    """Plain only where no YAML 1.1 or 1.2 reader could take the text for something else."""
    from ruamel.yaml import YAML

    from backendmgr.emit.document import document_of, dump
    from backendmgr.emit.entries import plain_safe

    words = ["yes", "No", "on", "OFF", "y", "n", "null", "~", "1e3", "0x1F", "2001-12-14", "<<"]
    words += ["- x", "a: b", "#c", "why?", "[x]", "{x}", "&a", "*a", "!t", "|", ">", "'", '"', "%"]
    words += ["@x", "`x", " lead", "trail ", "a\u202eb", "a\u2028b", "a\x00b", "a\nb", "é"]
    assert not any(plain_safe(w) for w in words)
    assert all(plain_safe(w) for w in ["llama-cpu", "/opt/x/llama-server", "A=1", "q4_k_m"])
    document = document_of({"models": {w: {"cmd": w, "aliases": [w]} for w in words}})
    text = dump(document)
    for version in ("1.1", "1.2"):
        yaml = YAML(typ="safe")
        yaml.version = tuple(int(p) for p in version.split("."))  # type: ignore[assignment]
        data = yaml.load(text)
        assert data["models"] == {w: {"cmd": w, "aliases": [w]} for w in words}, version
    assert "\u202e" not in text and "\u2028" not in text  # escaped, not hidden in the file


def test_unsetting_the_macros_a_value_names_is_refused(
    cli: Cli, tmp_path: Path, config_path: Path
) -> None:
    setup(tmp_path, config_path, 'models:\n  alpha-q4_k_m:\n    llama_swap: {macros: {foo: "7"}}\n')
    ok(cli("set", "alpha-q4_k_m", "env=D=${foo}"))
    line = refused(cli, config_path, "unset", "alpha-q4_k_m", "llama_swap")
    assert "${foo}" in line
    ok(cli("unset", "alpha-q4_k_m", "env", "llama_swap"))


def test_an_anchored_boolean_reaches_the_file_as_a_boolean(
    cli: Cli, tmp_path: Path, config_path: Path
) -> None:
    """``&t true`` is ruamel's ScalarBoolean, an int: it once reached llama-swap's file as
    ``1``, which a boolean field there refuses. Read fresh and from the config's snapshot."""
    setup(tmp_path, config_path, "")
    text = config_path.read_text().replace(
        "llama_swap: {", 'llama_swap: {"sendLoadingState": &t true, "includeAliasesInList": *t, ', 1
    )
    config_path.write_text(text)
    for run in ("fresh", "from the snapshot"):
        ok(cli("generate", "--force"))
        written = load(config_path)
        assert written["sendLoadingState"] is True, run
        assert written["includeAliasesInList"] is True, run
        check_schema(config_path)
