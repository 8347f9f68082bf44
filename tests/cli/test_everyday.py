"""Everyday use through the CLI's ``main()``, in this process: global options anywhere, "did
you mean", warnings, ``--json`` failures, progress summary, hand edits of the generated file,
and the small usage checks (issue 9, SPEC §13). One test runs the real console entry point to
hold its exit codes to ``main()``'s."""

from __future__ import annotations

import argparse
import io
import json
import os
import stat
from pathlib import Path

import pytest

from backendmgr.mirror import MirrorServer
from tests.support import publish_llama
from tests.support.cli import CliResult, error_line, ok, run_backendmgr, run_in_process
from tests.support.ggufs import write_gguf

GIB = 1 << 30
GLOBALS = ("--config", "--home", "--json", "--quiet", "--debug")


def bm(*args: str) -> CliResult:
    return run_in_process(*args)


def warnings(result: CliResult) -> list[str]:
    return [line for line in result.err.splitlines() if line.startswith("warning: ")]


@pytest.fixture
def models(tmp_path: Path, config_path: Path) -> Path:
    root = tmp_path / "models"
    write_gguf(root / "qwen3-8b-q4_k_m.gguf", "qwen3", layers=36, ctx=40960, size_bytes=GIB)
    config_path.parent.mkdir(parents=True, exist_ok=True)
    config_path.write_text(
        f"models_dirs: [{json.dumps(str(root))}]\n"
        "backends:\n  - {id: llama-src, kind: llama, path: /opt/llama/llama-server}\n"
    )
    return root


def test_the_console_entry_point_exits_with_main_s_code(models: Path) -> None:
    """What the tests below check through ``main()`` holds for ``python -m backendmgr``: its
    output and exit status (0, 1 for a refused command, 2 for a usage error)."""
    cases = (
        (("--json", "list"), 0),
        (("update", "llama-server"), 1),  # the world: nothing installed
        (("pin", "nope", "x"), 2),  # what was typed: an unknown row
        (("lst",), 2),
    )
    for args, code in cases:
        proc = run_backendmgr(*args)
        in_process = run_in_process(*args)
        assert proc.returncode == in_process.code == code, (args, proc.stderr)
        assert (proc.stdout, proc.stderr) == (in_process.out, in_process.err), args


# --- global options anywhere ----------------------------------------------------------------


def test_global_options_after_the_command(tmp_path: Path, config_path: Path) -> None:
    assert json.loads(ok(bm("list", "--json")).out) == []
    assert json.loads(ok(bm("--json", "list")).out) == []
    other = tmp_path / "other" / "config.yaml"
    other.parent.mkdir()
    other.write_text("backends:\n  - {id: mine, kind: llama, path: /x}\n")
    # --config/--home after the command, and before it (not reset by the subcommand)
    after = ok(bm("backends", "--config", str(other), "--home", str(tmp_path / "h2"), "--json"))
    before = ok(bm("--config", str(other), "--json", "backends"))
    assert [r["id"] for r in json.loads(after.out)] == ["mine"]
    assert [r["id"] for r in json.loads(before.out)] == ["mine"]
    assert not config_path.exists()
    # -q after the command (before its operands) silences a mutation's message
    assert (
        ok(bm("backends", "add", "-q", "x", "--kind", "custom", "--path", "/x", "--force")).out
        == ""
    )


def test_global_options_after_an_operand_are_refused_and_dash_dash_ends_options(
    tmp_path: Path, config_path: Path
) -> None:
    """SPEC §13: after the command's first operand a global option is not read (issue 29: a
    value a script put on the line must never redirect the config or the home)."""
    evil = tmp_path / "evil" / "config.yaml"
    home = tmp_path / "evil-home"
    for words in (
        ("set", "m", "ctx=4096", f"--config={evil}"),
        ("set", "m", "--config", str(evil), "ctx=4096"),
        ("set", "m", "ctx=4096", f"--home={home}"),
        ("unset", "m", "ctx", "--conf", str(evil)),  # an abbreviation too
        ("pin", "m", "x", "--json"),
        ("which", "m", "-q"),
        ("backends", "add", "x", "--kind", "custom", "--path", "/x", "--debug"),
    ):
        result = bm(*words)
        assert result.code == 2, (words, result)
        assert "after an operand is not read as an option" in error_line(result, 2), words
    assert not evil.parent.exists() and not home.exists() and not config_path.exists()
    # after "--" every word is an operand: the option-looking model id is stored as it is
    done = ok(bm("--json", "set", "--", f"--config={evil}", "ctx=4096"))
    assert json.loads(done.out)["model"] == f"--config={evil}"
    assert not evil.parent.exists() and config_path.exists()
    assert f"--config={evil}" in config_path.read_text()
    # after "--" even the command's own options are operands; before it they may follow one
    assert "--no-generate" in error_line(bm("unset", "--", "m", "ctx", "--no-generate"), 2)
    assert ok(bm("unset", "--no-generate", "--", f"--config={evil}", "ctx")).code == 0
    assert ok(bm("set", "m", "ctx=1", "--no-generate")).code == 0


def test_global_options_with_a_mirror(mirror: MirrorServer, mirror_root: Path) -> None:
    publish_llama(mirror_root, "b100", ["vulkan"])
    quiet = ok(bm("releases", "-q", "--json", "llama-server"))
    assert json.loads(quiet.out)[0]["tag"] == "b100"
    debug = ok(bm("install", "--debug", "--json", "llama-server"))
    assert json.loads(debug.out)["id"] == "llama-server@b100-vulkan"
    # --debug after the command shows the traceback of a failure
    assert "Traceback" in bm("--debug", "activate", "llama-server@nope").err


def _parsers() -> list[argparse.ArgumentParser]:
    from backendmgr.cli.parser import build_parser

    out, todo = [], [build_parser()]
    while todo:
        parser = todo.pop()
        out.append(parser)
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                todo.extend(action.choices.values())
    return out


def test_every_help_lists_the_global_options_and_every_option_has_help() -> None:
    parsers = _parsers()
    assert len(parsers) > 15
    for parser in parsers:
        text = parser.format_help()
        for option in GLOBALS:
            assert option in text, (parser.prog, option)
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction | argparse._VersionAction):
                continue
            if isinstance(action, argparse._SubParsersAction):
                continue
            assert action.help, (parser.prog, action.dest)
    shown = ok(bm("install", "--help")).out
    assert all(option in shown for option in GLOBALS)


def test_set_help_lists_the_keys() -> None:
    from backendmgr.cli.keys import KEY_HELP
    from backendmgr.manager import SETTABLE_KEYS

    assert list(KEY_HELP) == list(SETTABLE_KEYS)
    text = ok(bm("set", "--help")).out
    for key in SETTABLE_KEYS:
        assert f"\n  {key} " in text, key


# --- did you mean ---------------------------------------------------------------------------


def test_mistyped_command_suggests(config_path: Path) -> None:
    line = error_line(bm("lst"), 2)
    assert line.startswith('error: unknown command "lst"; did you mean list')
    assert "did you mean" in error_line(bm("backends", "ad", "x"), 2)
    listed = error_line(bm("zzzzzz"), 2)
    assert "choose from" in listed and "serve" in listed
    assert "__complete" not in listed  # the completion scripts' hidden helper


def test_mistyped_names_suggest(models: Path) -> None:
    assert error_line(bm("cmd", "qwen3-8b-q4_k"), 2) == (
        'error: no model "qwen3-8b-q4_k" was discovered; did you mean qwen3-8b-q4_k_m?'
    )
    assert error_line(bm("pin", "qwen3-8b-q4_k_m", "llama-sr"), 2) == (
        'error: no backend row "llama-sr"; did you mean llama-src?'
    )
    assert error_line(bm("default", "lama-src"), 2).endswith("did you mean llama-src?")
    assert error_line(bm("install", "lama-server"), 2).startswith(
        'error: unknown component "lama-server"; did you mean llama-server'
    )
    assert "did you mean ctx?" in error_line(bm("set", "qwen3-8b-q4_k_m", "ctxx=1"), 2)
    assert "did you mean ctx?" in error_line(bm("unset", "qwen3-8b-q4_k_m", "ctz"), 2)
    variant = error_line(bm("install", "llama-server", "--variant", "vulcan"), 2)
    assert "did you mean vulkan?" in variant and "known variants: cpu" in variant
    # nothing close: the known names instead
    assert 'see "backendmgr backends"' in error_line(bm("pin", "m", "zzzzzzzz"), 2)


def test_mistyped_build_suggests(mirror: MirrorServer, mirror_root: Path) -> None:
    publish_llama(mirror_root, "b11211", ["cpu"])
    ok(bm("install", "llama-server", "b11211", "--variant", "cpu"))
    assert error_line(bm("activate", "llama-server@b11210-cpu"), 2) == (
        "error: llama-server@b11210-cpu is not installed; did you mean llama-server@b11211-cpu?"
    )
    assert "did you mean llama-server@b11211-cpu?" in error_line(
        bm("uninstall", "llama-server@b11211-cpux"), 2
    )
    assert error_line(bm("uninstall", "llama-server"), 2) == (
        'error: "llama-server" is not a build; did you mean llama-server@b11211-cpu? '
        '(use COMPONENT@VERSION-VARIANT; see "backendmgr list")'
    )


# --- validation with warnings ---------------------------------------------------------------


def test_pin_and_set_on_an_unknown_model_warn(models: Path, config_path: Path) -> None:
    pinned = ok(bm("pin", "qwen3-8b", "llama-src"))
    assert warnings(pinned) == [
        'warning: no discovered model "qwen3-8b"; did you mean qwen3-8b-q4_k_m?'
    ]
    assert "qwen3-8b:" in config_path.read_text()  # kept, as SPEC §13 says
    data = json.loads(ok(bm("--json", "set", "qwen3-8b", "ctx=4096")).out)
    assert data["warnings"] == ['no discovered model "qwen3-8b"; did you mean qwen3-8b-q4_k_m?']
    assert warnings(ok(bm("pin", "qwen3-8b-q4_k_m", "llama-src"))) == []
    assert ok(bm("-q", "pin", "qwen3-8b", "llama-src")).err == ""  # -q: only errors


def test_ctx_above_the_trained_context_warns(models: Path, config_path: Path) -> None:
    result = ok(bm("set", "qwen3-8b-q4_k_m", "ctx=65536"))
    assert len(warnings(result)) == 1 and "40960" in warnings(result)[0]
    assert "ctx: 65536" in config_path.read_text()
    assert warnings(ok(bm("set", "qwen3-8b-q4_k_m", "ctx=32768"))) == []


def test_bad_extra_args_are_refused_when_set(models: Path, config_path: Path) -> None:
    before = config_path.read_bytes()
    line = error_line(bm("set", "qwen3-8b-q4_k_m", 'extra_args=--seed "1'), 2)  # a usage error
    assert "extra_args" in line and "quotation" in line
    assert config_path.read_bytes() == before
    ok(bm("set", "qwen3-8b-q4_k_m", "extra_args=--seed 1 --temp '0.5'"))
    assert ok(bm("--json", "cmd", "qwen3-8b-q4_k_m")).out.count("--seed") == 1
    # a hand edit with a bad quote is a config error naming the key, never a traceback later
    text = config_path.read_text().split("models:")[0]
    config_path.write_text(text + 'models:\n  qwen3-8b-q4_k_m:\n    extra_args: --seed "1\n')
    assert "extra_args" in error_line(bm("cmd", "qwen3-8b-q4_k_m"))


def test_set_says_what_it_set_on_one_line(models: Path, config_path: Path) -> None:
    """A value holding a newline (shell whitespace, so a valid extra_args) is echoed with the
    newline shown as an escape: the confirmation cannot print a line of its own, such as a
    fake ``error:``."""
    result = ok(bm("set", "qwen3-8b-q4_k_m", "extra_args=--seed 1\nerror: fake"))
    assert result.out.splitlines()[0] == (
        'set extra_args=--seed 1\\nerror: fake for "qwen3-8b-q4_k_m"'
    )
    assert not any(line.startswith("error:") for line in result.out.splitlines())
    assert "error: fake" in config_path.read_text()  # what was set is the value as typed


def test_backends_add_checks_kind_and_path(tmp_path: Path, config_path: Path) -> None:
    line = error_line(bm("backends", "add", "x", "--kind", "lama", "--path", "/bin/sh"), 2)
    assert 'unknown kind "lama"; did you mean llama' in line and "custom" in line
    missing = tmp_path / "nope" / "llama-server"
    assert "does not exist" in error_line(
        bm("backends", "add", "x", "--kind", "llama", "--path", str(missing))
    )
    plain = tmp_path / "plain"
    plain.write_text("#!/bin/sh\n")
    plain.chmod(0o644)
    assert "not executable" in error_line(
        bm("backends", "add", "x", "--kind", "llama", "--path", str(plain))
    )
    assert "not a file" in error_line(
        bm("backends", "add", "x", "--kind", "llama", "--path", str(tmp_path))
    )
    assert not config_path.exists()
    forced = ok(bm("backends", "add", "x", "--kind", "llama", "--path", str(missing), "--force"))
    assert warnings(forced) == [f"warning: {missing} does not exist"]
    plain.chmod(plain.stat().st_mode | stat.S_IXUSR)
    ok(bm("backends", "add", "y", "--kind", "LLAMA", "--path", str(plain)))
    ok(bm("backends", "add", "z", "--kind", "custom", "--path", "sh"))  # found on PATH


# --- --json failures ------------------------------------------------------------------------


def test_json_failures_print_one_document(config_path: Path) -> None:
    result = bm("--json", "update", "llama-server")  # refused: nothing is installed
    line = error_line(result, 1)
    assert json.loads(result.out) == {"error": line.removeprefix("error: "), "exit": 1}
    typed = bm("--json", "default", "nope")  # an unknown row: what was typed
    line = error_line(typed, 2)
    assert json.loads(typed.out) == {"error": line.removeprefix("error: "), "exit": 2}
    usage = bm("--json", "releases", "llama-server", "--limit", "0")
    line = error_line(usage, 2)
    assert json.loads(usage.out) == {"error": line.removeprefix("error: "), "exit": 2}
    command = bm("--json", "lst")
    assert json.loads(command.out)["exit"] == 2
    assert bm("lst").out == ""  # without --json stdout stays empty


# --- usage checks ---------------------------------------------------------------------------


@pytest.mark.parametrize("limit", ["0", "-1", "ten"])
def test_releases_limit_must_be_positive(limit: str) -> None:
    assert "--limit" in error_line(bm("releases", "llama-server", f"--limit={limit}"), 2)


def test_dry_run_of_an_installed_build(mirror: MirrorServer, mirror_root: Path) -> None:
    publish_llama(mirror_root, "b100", ["vulkan"])
    fresh = ok(bm("install", "llama-server", "--dry-run")).out
    assert fresh.startswith("would install llama-server@b100-vulkan")
    assert " B  http" in fresh or "KiB  http" in fresh  # sizes in the one unit system
    ok(bm("install", "llama-server"))
    again = ok(bm("install", "llama-server", "--dry-run"))
    assert again.out.startswith("llama-server@b100-vulkan is already installed")
    assert json.loads(ok(bm("--json", "install", "llama-server", "--dry-run")).out)[
        "already_installed"
    ]


def test_repeating_a_change_is_a_no_op_and_says_so(
    mirror: MirrorServer, mirror_root: Path, models: Path, config_path: Path
) -> None:
    """Each change run twice: the second reports changed: false in words that say so, and
    leaves the config file as it was."""
    publish_llama(mirror_root, "b100", ["vulkan"])
    model = "qwen3-8b-q4_k_m"

    def twice(*args: str) -> tuple[dict[str, object], dict[str, object]]:
        first = json.loads(ok(bm("--json", *args)).out)
        before = config_path.read_bytes()
        second = json.loads(ok(bm("--json", *args)).out)
        assert config_path.read_bytes() == before, args
        return first, second

    first, second = twice("install", "llama-server")
    assert first["changed"] is True and second["changed"] is False
    assert second["message"] == "llama-server@b100-vulkan is already installed and activated"
    first, second = twice("activate", "llama-server@b100-vulkan")
    assert first["changed"] is False  # installing it activated it
    assert second["message"] == "llama-server@b100-vulkan is already the activated build"
    first, second = twice("default", "llama-src")
    assert (first["changed"], second["changed"]) == (True, False)
    assert second["message"] == '"llama-src" is already the default (★) for llm'
    first, second = twice("set", model, "ctx=4096", "extra_args=--seed 1")
    assert (first["changed"], second["changed"]) == (True, False)
    assert second["message"] == f'"{model}" already has ctx=4096, extra_args=--seed 1'
    first, second = twice("unset", model, "ctx")
    assert (first["changed"], second["changed"]) == (True, False)
    assert second["message"] == f'"{model}" has no ctx set'
    first, second = twice("pin", model, "llama-src")
    assert (first["changed"], second["changed"]) == (True, False)


def test_models_names_the_unusable_folder(tmp_path: Path, config_path: Path) -> None:
    config_path.parent.mkdir(parents=True)
    config_path.write_text("ttl: 600\n")
    assert warnings(ok(bm("models"))) == [
        f"warning: no models folder: models_dirs in {config_path} is empty; add yours with "
        '"backendmgr models add-dir PATH"'
    ]
    afile = tmp_path / "a-file"
    afile.write_text("x")
    gone = tmp_path / "gone"
    config_path.write_text(f"models_dirs: [{json.dumps(str(gone))}, {json.dumps(str(afile))}]\n")
    result = ok(bm("models"))
    assert warnings(result) == [
        f"warning: models_dirs: {gone} does not exist",
        f"warning: models_dirs: {afile} is not a folder",
    ]
    assert "set models_dirs" not in result.out


# --- progress and sizes ---------------------------------------------------------------------


def test_install_prints_one_summary_line(mirror: MirrorServer, mirror_root: Path) -> None:
    assets = publish_llama(mirror_root, "b100", ["vulkan"])
    result = ok(bm("install", "llama-server"))
    summary = [line for line in result.err.splitlines() if line.startswith("llama-server@")]
    assert len(summary) == 1, result.err
    size = len(next(iter(assets.values())))
    from backendmgr.units import format_size

    assert summary[0].startswith(f"llama-server@b100-vulkan: {format_size(size)} in ")
    assert "/s; verified by the published digest" in summary[0]
    again = ok(bm("install", "llama-server"))
    assert not [line for line in again.err.splitlines() if line.startswith("llama-server@")]
    listed = ok(bm("list")).out
    assert " KiB " in listed or " MiB " in listed


def test_size_units() -> None:
    from backendmgr.units import format_size

    assert [format_size(n) for n in (0, 1023, 1024, 12_600_000, 5 * GIB)] == [
        "0 B",
        "1023 B",
        "1.0 KiB",
        "12.0 MiB",
        "5.0 GiB",
    ]


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_bar_shows_percent_size_speed_and_eta() -> None:
    from backendmgr.cli.render import ProgressView, Renderer
    from backendmgr.events import ProgressEvent

    screen = _Tty()
    out = Renderer(stdout=screen, stderr=io.StringIO())
    with ProgressView(out) as view:
        view(ProgressEvent("downloading", asset="a.tar.gz", bytes_done=0, bytes_total=4 << 20))
        view(
            ProgressEvent("downloading", asset="a.tar.gz", bytes_done=1 << 20, bytes_total=4 << 20)
        )
        view._progress.refresh()
        drawn = screen.getvalue()
    assert "a.tar.gz" in drawn and "25%" in drawn
    assert "1.0/4.0 MiB" in drawn
    assert "/s" in drawn or "?" in drawn
    assert "-:--:--" in drawn or "0:00:" in drawn


# --- the generated file is the user's too ---------------------------------------------------


def test_hand_edited_output_is_kept_and_reported(models: Path, config_path: Path) -> None:
    output = config_path.parent / "llama-swap.yaml"
    ok(bm("generate"))
    assert "up to date" in ok(bm("generate", "--check")).out
    edited = output.read_text() + "# my note\n"
    output.write_text(edited)
    line = error_line(bm("generate", "--check"))
    assert "modified" in line and "up to date" not in line
    result = ok(bm("generate"))
    backup = output.with_name("llama-swap.yaml.bak")
    assert warnings(result) == [
        f"warning: {output} was modified by hand; kept that copy as {backup}"
    ]
    assert backup.read_text() == edited
    assert "# my note" not in output.read_text()
    assert "up to date" in ok(bm("generate", "--check")).out
    assert ok(bm("generate")).err == ""  # unchanged now: no copy, no warning


def test_a_change_that_rewrites_a_hand_edited_output_says_so(
    models: Path, config_path: Path
) -> None:
    """``set`` (like every change) regenerates: the hand-edited copy is kept, and the change's
    own result says so, on stderr and in its --json document."""
    output = config_path.parent / "llama-swap.yaml"
    ok(bm("generate"))
    model = json.loads(ok(bm("--json", "models")).out)[0]["id"]
    output.write_text(output.read_text() + "# my note\n")
    backup = output.with_name("llama-swap.yaml.bak")
    result = ok(bm("set", model, "ctx=4096"))
    assert warnings(result) == [
        f"warning: {output} was modified by hand; kept that copy as {backup}"
    ]
    assert "# my note" in backup.read_text() and "# my note" not in output.read_text()
    output.write_text(output.read_text() + "# again\n")
    document = json.loads(ok(bm("--json", "unset", model, "ctx")).out)
    assert any("modified by hand" in w for w in document["warnings"]), document


def test_generate_leaves_only_its_file_in_the_output_folder(tmp_path: Path, models: Path) -> None:
    out = tmp_path / "llama-swap-dir"
    out.mkdir()  # --output names a file in a folder that exists (issue 20)
    ok(bm("generate", "--output", str(out / "config.yaml")))
    assert sorted(p.name for p in out.iterdir()) == ["config.yaml"]  # its lock is in the home


def test_a_file_backendmgr_did_not_write_is_kept(models: Path, config_path: Path) -> None:
    output = config_path.parent / "llama-swap.yaml"
    output.write_text("models: {}\n# written by a person\n")
    assert "modified" in error_line(bm("generate", "--check"))
    data = json.loads(ok(bm("--json", "generate")).out)
    assert data["backup"] == str(output.with_name("llama-swap.yaml.bak"))
    assert Path(data["backup"]).read_text() == "models: {}\n# written by a person\n"
    # a second, different hand edit keeps the first copy and gets a timestamped one
    output.write_text("models: {}\n# second edit\n")
    ok(bm("generate"))
    copies = sorted(p.name for p in output.parent.iterdir() if p.name.endswith(".bak"))
    assert len(copies) == 2 and "llama-swap.yaml.bak" in copies
    assert not [p for p in output.parent.iterdir() if p.name.endswith(".tmp")]
    assert os.access(output, os.R_OK)
