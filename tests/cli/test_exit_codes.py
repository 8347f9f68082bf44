"""Issue 33 (4): one exit-code rule over every command (SPEC §13, README "Exit status"):
what the user typed wrong (an unknown command, option, key, value, component, row, build or
address) is 2; what the world refused is 1; Ctrl-C is 130. Each command is run with a
mistyped option, an unknown operand and a value its option cannot take."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from backendmgr.cli.commands import COMMANDS
from tests.support.cli import CliResult, error_line, run_in_process
from tests.support.ggufs import write_gguf

GIB = 1 << 30
MODEL = "qwen3-8b-q4_k_m"

# Per command: an operand (or operands) naming nothing known, and an option value the option
# cannot take; each must be refused with exit status 2.
UNKNOWN: dict[str, tuple[str, ...]] = {
    "catalog": ("catalog", "extra"),
    "releases": ("releases", "llama-servr"),
    "install": ("install", "llama-servr"),
    "uninstall": ("uninstall", "llama-server@b1-cpu"),
    "activate": ("activate", "llama-server@b1-cpu"),
    "list": ("list", "llama-servr"),
    "doctor": ("doctor", "extra"),
    "backends": ("backends", "ad"),
    "default": ("default", "llama-sr"),
    "pin": ("pin", MODEL, "llama-sr"),
    "unpin": ("unpin", MODEL, "extra"),
    "set": ("set", MODEL, "cxt=4096"),
    "unset": ("unset", MODEL, "cxt"),
    "models": ("models", "add-dri", "/tmp"),
    "cmd": ("cmd", "qwen3-8b"),
    "generate": ("generate", "extra"),
    "update": ("update", "llama-servr"),
    "prune": ("prune", "llama-servr"),
    "cache": ("cache", "clen"),
    "which": ("which", "qwen3-8b"),
    "config": ("config", "shwo"),
    "lock": ("lock", "extra"),
    "sync": ("sync", "a.lock", "extra"),
    "fetch": ("fetch", "dir", "a.lock", "extra"),
    "completion": ("completion", "tcsh"),
    "verify": ("verify", "qwen3-8b"),
    "tune": ("tune", "qwen3-8b"),
    "bench": ("bench", "qwen3-8b"),
    "bisect": ("bisect", "qwen3-8b", "--good", "b1", "--bad", "b2"),
    "up": ("up", "extra"),
    "service": ("service", "strat"),
    "status": ("status", "extra"),
    "serve": ("serve", "extra"),
}
BAD_VALUE: dict[str, tuple[str, ...]] = {
    "catalog": ("catalog", "--json=yes"),
    "releases": ("releases", "llama-server", "--limit", "abc"),
    "install": ("install", "llama-server", "--dry-run", "--platform", "amiga-m68k"),
    "uninstall": ("uninstall", "not a build"),
    "activate": ("activate", "llama-server@"),
    "list": ("list", "--json=yes"),
    "doctor": ("doctor", "--fix=yes"),
    "backends": ("backends", "add", "x", "--kind", "lama", "--path", "/bin/true"),
    "default": ("default", "bad\nid"),
    "pin": ("pin", "bad\nid", "llama-src"),
    "unpin": ("unpin", "bad\nid"),
    "set": ("set", MODEL, "ctx=abc"),
    "unset": ("unset", MODEL, "backend"),
    "models": ("models", "add-dir", "/no/such/folder"),
    "cmd": ("cmd", "bad\nid"),
    "generate": ("generate", "--output", "/no/such/folder/x.yaml"),
    "update": ("update", "--dry-run=yes"),
    "prune": ("prune", "--keep", "-1"),
    "cache": ("cache", "clean", "--dry-run=yes"),
    "which": ("which", "bad\nid"),
    "config": ("config", "show", "--json=yes"),
    "lock": ("lock", "--fetch="),
    "sync": ("sync", "--force"),
    "fetch": ("fetch", ""),
    "completion": ("completion", ""),
    "verify": ("verify", "--timeout", "abc"),
    "tune": ("tune", MODEL, "--budget", "-1"),
    "bench": ("bench", MODEL, "--repeat", "0"),
    "bisect": ("bisect", MODEL, "--good", "b1", "--bad", "b2", "--metric", "size"),
    "up": ("up", "--listen", "nope"),
    "service": ("service", "install", "--listen", "nope"),
    "status": ("status", "--json=yes"),
    "serve": ("serve", "--port", "99999"),
}
SHOWN = [name for name in COMMANDS if not name.startswith("_")]


@pytest.fixture(autouse=True)
def world(tmp_path: Path, config_path: Path) -> None:
    root = tmp_path / "models"
    write_gguf(root / f"{MODEL}.gguf", "qwen3", layers=36, ctx=40960, size_bytes=GIB)
    config_path.parent.mkdir(parents=True)
    config_path.write_text(
        f"models_dirs: [{json.dumps(str(root))}]\n"
        "backends:\n  - {id: llama-src, kind: llama, path: /bin/true}\n"
    )


def usage(*args: str) -> str:
    result: CliResult = run_in_process(*args)
    return error_line(result, 2)


def test_every_command_is_walked() -> None:
    assert set(UNKNOWN) == set(BAD_VALUE) == set(SHOWN), "add the new command to both tables"


@pytest.mark.parametrize("command", SHOWN)
def test_a_mistyped_option_is_a_usage_error(command: str) -> None:
    line = usage(command, "--no-such-opton")  # a missing operand may be said first
    assert "--no-such-opton" in line or "arguments are required" in line, line


@pytest.mark.parametrize("command", SHOWN)
def test_an_unknown_operand_is_a_usage_error(command: str) -> None:
    usage(*UNKNOWN[command])


@pytest.mark.parametrize("command", SHOWN)
def test_a_bad_value_is_a_usage_error(command: str) -> None:
    usage(*BAD_VALUE[command])


def test_an_unknown_command_is_a_usage_error() -> None:
    assert "did you mean" in usage("instal", "llama-server")


def test_what_the_world_refuses_is_1(tmp_path: Path, config_path: Path) -> None:
    """The same commands, typed right, against a world that says no: 1."""
    assert "is not installed" in error_line(run_in_process("update", "llama-server"), 1)
    config_path.write_text("models_dirs: [\n")  # a broken config file is the world's
    assert str(config_path) in error_line(run_in_process("models"), 1)
    assert "no backendmgr service" in error_line(run_in_process("service", "start"), 1)
