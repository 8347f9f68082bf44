"""Hostile config files and manifests through the real CLI: deep nesting, alias bombs, links,
read-only files, comment-only files and file modes."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import CliResult, run_backendmgr

Cli = Callable[..., CliResult]


def alias_bomb(levels: int) -> str:
    """The "billion laughs": each level is ten aliases of the one before."""
    lines = ["a: &a [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, levels):
        name, prev = chr(ord("a") + i), chr(ord("a") + i - 1)
        lines.append(f"{name}: &{name} [{', '.join([f'*{prev}'] * 10)}]")
    return "\n".join(lines) + "\n"


def deep(levels: int) -> str:
    return "models_dirs: " + "[" * levels + "]" * levels + "\n"


def one_error(result: CliResult) -> str:
    assert result.code == 1, result
    lines = [line for line in result.err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.err
    assert "Traceback" not in result.err
    return lines[0]


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (deep(5000), "line 1: nested more than 64 levels deep"),
        (alias_bomb(10), "line 6: aliases expand to more than 200000 values"),
        ("models: &b {k: [*b]}\n", "line 1: alias *b is inside the value it names"),
    ],
)
def test_hostile_config_is_one_line_error_and_changes_nothing(
    cli: Cli, config_path: Path, text: str, says: str
) -> None:
    config_path.parent.mkdir(parents=True)
    config_path.write_text(text)
    for argv in (("list",), ("backends",), ("set", "m1", "ctx=4096")):
        started = time.monotonic()
        line = one_error(cli(*argv))
        assert time.monotonic() - started < 5
        assert str(config_path) in line and says in line, line
    assert config_path.read_text() == text


def test_hostile_config_in_a_child_process_has_no_traceback(config_path: Path) -> None:
    config_path.parent.mkdir(parents=True)
    config_path.write_text(deep(5000))
    result = run_backendmgr("list", timeout=30)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        f"error: {config_path} line 1: nested more than 64 levels deep; flatten the YAML"
    ]


def test_anchors_within_the_limit_still_work(cli: Cli, config_path: Path) -> None:
    config_path.parent.mkdir(parents=True)
    config_path.write_text("models:\n  a: &shared {ctx: 8192, extra_args: --jinja}\n  b: *shared\n")
    assert cli("set", "c", "ctx=4096").code == 0
    text = config_path.read_text()
    assert "&shared" in text and "*shared" in text and "c:\n    ctx: 4096" in text


def test_oversized_config_is_refused_without_reading_it_all(cli: Cli, config_path: Path) -> None:
    config_path.parent.mkdir(parents=True)
    with config_path.open("wb") as fh:
        fh.write(b"# padding\n")
        fh.truncate(64 << 20)  # sparse: 64 MiB of NUL bytes
    line = one_error(cli("list"))
    assert "larger than 8 MiB" in line


@pytest.mark.parametrize("text", [deep(5000), alias_bomb(10)])
def test_hostile_user_manifest_is_one_line_error(cli: Cli, config_path: Path, text: str) -> None:
    manifests = config_path.parent / "manifests"
    manifests.mkdir(parents=True)
    (manifests / "evil.yaml").write_text(text)
    started = time.monotonic()
    line = one_error(cli("catalog"))
    assert time.monotonic() - started < 5
    assert line.startswith(f"error: manifest {manifests / 'evil.yaml'} line ")
