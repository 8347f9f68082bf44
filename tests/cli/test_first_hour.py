"""The first hour of a new user (issue 20): the places that misled or stopped one, each through
the real CLI (in this process, or as a child process where the console entry point, a shell
or a server matters)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import CliResult

Cli = Callable[..., CliResult]


def usage_error(result: CliResult) -> str:
    """The one ``error:`` line of a usage error (exit status 2)."""
    assert result.code == 2, result
    assert "Traceback" not in result.err, result.err
    errors = [line for line in result.err.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, result.err
    return errors[0]


# --- 11: usage errors ------------------------------------------------------------------------


def test_a_mistyped_option_names_the_option_and_the_commands_help(cli: Cli) -> None:
    line = usage_error(cli("install", "llama-server", "--varient", "cuda"))
    assert "--varient" in line and "did you mean --variant?" in line
    assert "see 'backendmgr install --help'" in line
    line = usage_error(cli("backends", "add", "x", "--kind", "llama", "--path", "/bin/sh", "--nme"))
    assert "did you mean --name?" in line and "'backendmgr backends add --help'" in line
    assert "did you mean --json?" in usage_error(cli("list", "--jsn"))


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("backends", "add", "x", "--kind", "lama", "--path", "/bin/sh"), "did you mean llama"),
        (("install", "llama-server", "--platform", "windows-x64"), "use it with --dry-run"),
    ],
)
def test_usage_errors_exit_2(
    cli: Cli, config_path: Path, args: tuple[str, ...], needle: str
) -> None:
    line = usage_error(cli(*args))
    assert needle in line
    assert not config_path.exists()  # nothing was written


def test_completion_has_no_json_form(cli: Cli) -> None:
    for args in (("completion", "bash", "--json"), ("--json", "completion", "zsh")):
        result = cli(*args)
        assert "no JSON form" in usage_error(result)
        assert json.loads(result.out) == {"error": result.err[7:].strip(), "exit": 2}
    assert cli("completion", "bash").out.startswith("# bash completion for backendmgr")
