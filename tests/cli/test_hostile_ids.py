"""Hostile row and model ids through the real CLI: refused with one ``error:`` line, exit 2,
and the config file left byte for byte as it was; a hand-edited file holding one is refused
at load with the file, line and entry named, never echoed raw."""

from __future__ import annotations

from pathlib import Path

import pytest

from backendmgr.discovery.chars import unsafe_char
from tests.support.cli import Cli, CliResult, run_backendmgr

CONFIG = """\
# hand-written
backends:
  - id: llama-src
    kind: llama
    path: /opt/llama/bin/llama-server
models:
  qwen3-8b:   # daily driver
    ctx: 32768
"""

# Wrong whatever the registry holds: no check of "does it exist" may run first.
UNSAFE = [
    pytest.param("a\x00b", id="nul"),
    pytest.param("x\ny", id="newline"),
    pytest.param("x\r", id="cr"),
    pytest.param("a\x1bb", id="escape"),
    pytest.param("a\u202eb", id="bidi-override"),
    pytest.param("a\u2028b", id="line-separator"),
    pytest.param("r" * 2000, id="2000-chars"),
    pytest.param("  ", id="blank"),
]
NOT_A_SEGMENT = [
    pytest.param("../../x", id="dotdot-slash"),
    pytest.param("a/b", id="slash"),
    pytest.param("a\\b", id="backslash"),
    pytest.param(".", id="dot"),
    pytest.param("..", id="dotdot"),
    pytest.param("r" * 129, id="129-chars"),
]
MODEL_IDS = [*UNSAFE, pytest.param("m" * 60_000, id="60k-chars"), pytest.param("", id="empty")]


def assert_refused(result: CliResult, fragment: str = "") -> None:
    """Exit 2, one printable ``error:`` line on stderr, nothing else."""
    assert result.code == 2, result
    lines = result.err.splitlines()
    assert len(lines) == 1 and result.err.endswith("\n"), repr(result.err)
    assert lines[0].startswith("error: ") and fragment in lines[0], lines[0]
    assert unsafe_char(lines[0]) is None, repr(lines[0])
    assert len(lines[0]) < 300, lines[0]
    assert result.out == ""


@pytest.fixture
def config(config_path: Path) -> Path:
    config_path.parent.mkdir(parents=True, exist_ok=True)
    config_path.write_text(CONFIG)
    return config_path


ADD = ("backends", "add", "{}", "--kind", "llama", "--path", "/opt/x", "--force")


@pytest.mark.parametrize("row_id", [*UNSAFE, *NOT_A_SEGMENT])
@pytest.mark.parametrize(
    "args",
    [ADD, ("backends", "remove", "{}")],
    ids=["add", "remove"],
)
def test_manual_row_ids_are_refused(
    cli: Cli, config: Path, args: tuple[str, ...], row_id: str
) -> None:
    before = config.read_bytes()
    assert_refused(cli(*(a.format(row_id) if a == "{}" else a for a in args)), "row id")
    assert config.read_bytes() == before


@pytest.mark.parametrize(
    "row_id",
    [*UNSAFE, *(p for p in NOT_A_SEGMENT if p.id != "129-chars")],
)
def test_default_refuses_a_malformed_row_id(cli: Cli, config: Path, row_id: str) -> None:
    before = config.read_bytes()
    assert_refused(cli("default", row_id), "row id")
    assert config.read_bytes() == before


@pytest.mark.parametrize("row_id", UNSAFE)
def test_pin_refuses_a_malformed_row_id(cli: Cli, config: Path, row_id: str) -> None:
    before = config.read_bytes()
    assert_refused(cli("pin", "qwen3-8b", row_id), "row id")
    assert config.read_bytes() == before


@pytest.mark.parametrize("model", MODEL_IDS)
@pytest.mark.parametrize(
    "args",
    [
        ("pin", "{}", "llama-src"),
        ("unpin", "{}"),
        ("set", "{}", "ctx=4096"),
        ("unset", "{}", "ctx"),
    ],
    ids=["pin", "unpin", "set", "unset"],
)
def test_model_ids_are_refused(cli: Cli, config: Path, args: tuple[str, ...], model: str) -> None:
    before = config.read_bytes()
    assert_refused(cli(*(model if a == "{}" else a for a in args)), "model id")
    assert config.read_bytes() == before


def test_refused_without_a_config_file_creates_none(cli: Cli, config_path: Path) -> None:
    assert_refused(cli("set", "x\ny", "ctx=4096"), 'model id "x\\ny" holds control character')
    assert_refused(cli(*(a.format("a\x00b") if a == "{}" else a for a in ADD)), "U+0000")
    assert not config_path.exists()


def test_a_newline_id_through_the_console_entry_point(config: Path) -> None:
    """The child process gets the id in argv exactly as a shell's $'x\\ny' would pass it."""
    before = config.read_bytes()
    for args in (("pin", "x\ny", "llama-src"), ADD):
        proc = run_backendmgr(*(a.format("x\ny") if a == "{}" else a for a in args))
        assert_refused(CliResult(proc.returncode, proc.stdout, proc.stderr), "U+000A")
    assert config.read_bytes() == before


def test_the_bounds_are_inclusive(cli: Cli, config: Path) -> None:
    """Proves the refusals above come from the rule, not from refusing everything."""
    assert cli(*(a.format("r" * 128) if a == "{}" else a for a in ADD)).code == 0
    assert cli("backends", "remove", "r" * 128).code == 0
    assert cli("set", "m" * 1024, "ctx=4096").code == 0
    assert_refused(cli("set", "m" * 1025, "ctx=4096"), "1025 characters long; the most is 1024")
    # discovery's ids keep a "/" out, but the API routes model ids as paths: allowed
    assert cli("pin", "org/model", "llama-src").code == 0
    assert cli("unset", "m" * 1024, "ctx").code == 0
    text = config.read_text()
    assert "m" * 1024 not in text and "org/model:\n    backend: llama-src" in text


def write(config_path: Path, text: str) -> None:
    config_path.parent.mkdir(parents=True, exist_ok=True)
    config_path.write_text(text)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        (
            'backends:\n  - id: llama-src\n    path: /x\n  - id: "a\\0b"\n    path: /y\n',
            'line 4: backends[1].id: row id "a\\x00b" holds control character U+0000',
        ),
        (
            'models:\n  ok: {ctx: 1}\n  "a\\0b":\n    ctx: 5\n',
            'line 1: models: model id "a\\x00b" holds control character U+0000',
        ),
        (
            'models:\n  "x\\ny":\n    backend: llama-src\n',
            'models: model id "x\\ny" holds control character U+000A',
        ),
        (
            'models:\n  "a\\u202eb":\n    ctx: -1\n',  # the key is checked before its values
            'models: model id "a\\u202eb" holds control character U+202E',
        ),
        (
            f"models:\n  ? {'m' * 60_000}\n  : ctx: 5\n",  # an explicit key: no 1024 cap
            "is 60000 characters long; the most is 1024",
        ),
        (
            "backends:\n  - id: ../../x\n    kind: llama\n    path: /x\n",
            'line 2: backends[0]: row id "../../x" may not contain "/"',
        ),
    ],
    ids=["nul-row", "nul-model", "newline-model", "bidi-model-bad-value", "60k-model", "slash-row"],
)
def test_a_hand_edited_config_with_a_hostile_id_is_refused_at_load(
    cli: Cli, config_path: Path, text: str, fragment: str
) -> None:
    write(config_path, text)
    before = config_path.read_bytes()
    for args in (("backends",), ("models",), ("unpin", "qwen3-8b")):
        result = cli(*args)
        assert result.code == 1, result
        lines = result.err.splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), repr(result.err)
        assert str(config_path) in lines[0] and fragment in lines[0], lines[0]
        assert unsafe_char(lines[0]) is None and len(lines[0]) < 400, repr(lines[0][:400])
    assert config_path.read_bytes() == before


def test_installer_rows_keep_their_ids(cli: Cli, config_path: Path) -> None:
    """A build row's id carries a release tag, which may hold "/": it loads and can be pinned."""
    write(
        config_path,
        "backends:\n  - id: llama-server\n    kind: llama\n    path: /b/llama-server\n"
        "    managed: true\n    component: llama-server\n    version: rel/1\n    variant: cpu\n"
        "  - id: llama-server@rel/1-cpu\n    kind: llama\n    path: /b/llama-server\n"
        "    managed: true\n    component: llama-server\n    version: rel/1\n"
        "    variant: cpu\n    build: true\n",
    )
    assert cli("backends").code == 0
    assert cli("pin", "m", "llama-server@rel/1-cpu").code == 0
    assert "backend: llama-server@rel/1-cpu" in config_path.read_text()
