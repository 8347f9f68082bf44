from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.cli import Cli, CliResult, run_in_process

HAND_WRITTEN = """\
# ~/.config/backendmgr/config.yaml: my setup
models_dirs:
  - /models        # NVMe
  - ~/hf-cache/hub # HF cache
vram_budget_gb: 22   # leave room for the desktop
ttl: 900
llama_swap:
  logLevel: info   # quiet please
backends:
  # built from source, keep first
  - id: llama-src
    kind: llama
    name: "llama.cpp (source)"
    path: /opt/llama/bin/llama-server   # -DGGML_HIP=ON
  - id: vllm-venv
    kind: vllm
    path: /opt/vllm/bin/vllm
models:
  qwen3-8b-q4_k_m:   # daily driver
    ctx: 32768       # plenty
    extra_args: "--seed 1"
"""


def write_config(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def assert_error_line(result: CliResult, code: int, fragment: str) -> None:
    assert result.code == code, result
    lines = result.err.splitlines()
    assert len(lines) == 1, result.err
    assert lines[0].startswith("error: ") and fragment in lines[0], lines[0]
    assert "Traceback" not in result.err


def test_edits_keep_every_comment_and_untouched_key(cli: Cli, config_path: Path) -> None:
    write_config(config_path, HAND_WRITTEN)
    assert cli("pin", "qwen3-8b-q4_k_m", "vllm-venv").code == 0
    assert cli("default", "llama-src").code == 0
    assert (
        cli(
            "backends", "add", "sd-local", "--kind", "sd", "--path", "/opt/sd/sd-server", "--force"
        ).code
        == 0
    )
    text = config_path.read_text()
    expected = (
        HAND_WRITTEN.replace(
            "    path: /opt/llama/bin/llama-server   # -DGGML_HIP=ON\n",
            "    path: /opt/llama/bin/llama-server   # -DGGML_HIP=ON\n    default: true\n",
        )
        .replace(
            "    path: /opt/vllm/bin/vllm\n",
            "    path: /opt/vllm/bin/vllm\n  - id: sd-local\n    kind: sd\n"
            "    path: /opt/sd/sd-server\n",
        )
        .replace(
            '    extra_args: "--seed 1"\n', '    extra_args: "--seed 1"\n    backend: vllm-venv\n'
        )
    )
    assert text == expected
    for line in HAND_WRITTEN.splitlines():
        assert line in text.splitlines()


def test_backends_json_keys_and_order(cli: Cli, config_path: Path) -> None:
    write_config(config_path, HAND_WRITTEN)
    result = cli("--json", "backends")
    assert result.code == 0
    rows = json.loads(result.out)
    assert [r["id"] for r in rows] == ["llama-src", "vllm-venv"]
    assert set(rows[0]) == {
        "id",
        "kind",
        "name",
        "path",
        "default",
        "managed",
        "build",
        "component",
        "version",
        "variant",
        "classes",
        "capabilities",
    }
    assert rows[1]["classes"] == ["llm"]
    assert rows[0]["capabilities"] is None  # its executable does not exist here


def test_backends_table(cli: Cli, config_path: Path) -> None:
    write_config(config_path, HAND_WRITTEN)
    assert cli("default", "vllm-venv").code == 0
    out = cli("backends").out
    assert "llama-src" in out and "/opt/vllm/bin/vllm" in out
    star_line = next(line for line in out.splitlines() if "vllm-venv" in line)
    assert "★" in star_line


def test_empty_registry_says_what_to_do(cli: Cli) -> None:
    result = cli("backends")
    assert result.code == 0 and "registry is empty" in result.out
    assert json.loads(cli("--json", "backends").out) == []


@pytest.mark.parametrize(
    ("args", "fragment", "code"),
    [
        # a row that exists is the state refusing (1); the rest were typed wrong (2)
        (("backends", "add", "llama-src", "--kind", "llama", "--path", "/x"), "already exists", 1),
        (("backends", "add", "x@1", "--kind", "llama", "--path", "/x"), 'may not contain "@"', 2),
        (
            ("backends", "add", "llama-server", "--kind", "llama", "--path", "/x"),
            "catalog component id",
            2,
        ),
        (("backends", "add", "vllm", "--kind", "vllm", "--path", "/x"), "catalog component id", 2),
        (
            ("backends", "add", "blank", "--kind", "llama", "--path", "  "),
            "path must not be blank",
            2,
        ),
        (("backends", "remove", "nope"), 'no backend row "nope"', 2),
        (("default", "nope"), 'no backend row "nope"', 2),
        (("pin", "m", "nope"), 'no backend row "nope"', 2),
        (("set", "m", "ctx=abc"), "ctx: Input should be a valid integer", 2),
        (
            ("set", "m", "vllm_gpu_util=2"),
            "vllm_gpu_util: Input should be less than or equal to 1",
            2,
        ),
        (("set", "m", "colour=red"), 'unknown key "colour"', 2),
        (("set", "m", "backend=vllm-venv"), "backendmgr pin", 2),
        (("set", "m", "ctx"), '"ctx" is not KEY=VALUE', 2),
        (("set", "m", "llama_swap=[1]"), "llama_swap must be a YAML mapping", 2),
        (("unset", "m", "colour"), 'unknown key "colour"', 2),
    ],
)
def test_refusals_are_one_line_and_change_nothing(
    cli: Cli, config_path: Path, args: tuple[str, ...], fragment: str, code: int
) -> None:
    """What the user typed wrong (a value its key cannot take, an unknown key or row, no
    KEY=VALUE) is a usage error: exit 2 (issues 20, 33); a row that exists already is 1."""
    write_config(config_path, HAND_WRITTEN)
    before = config_path.read_bytes()
    assert_error_line(cli(*args), code, fragment)
    assert config_path.read_bytes() == before


def test_remove_managed_row_says_use_uninstall(cli: Cli, config_path: Path) -> None:
    write_config(
        config_path,
        "backends:\n  - id: llama-server\n    kind: llama\n    path: /b/llama-server\n"
        "    managed: true\n    component: llama-server\n    version: b1\n    variant: cpu\n"
        "  - id: llama-server@b1-cpu\n    kind: llama\n    path: /b/llama-server\n"
        "    managed: true\n"
        "    component: llama-server\n    version: b1\n    variant: cpu\n    build: true\n",
    )
    before = config_path.read_bytes()
    assert_error_line(cli("backends", "remove", "llama-server"), 1, 'use "backendmgr uninstall"')
    assert_error_line(cli("backends", "remove", "llama-server@b1-cpu"), 1, "uninstall")
    assert_error_line(
        cli("default", "llama-server@b1-cpu"), 1, "is a build row and cannot be the default"
    )
    assert config_path.read_bytes() == before


@pytest.mark.parametrize(
    ("text", "args", "fragment"),
    [
        ("ttl: 5\nbackends: [\n", ("backends",), "line 3"),
        ("ttl: 5\nbackends: [\n", ("pin", "m", "x"), "line 3"),
        ("colour: blue\n", ("backends",), 'line 1: unknown key "colour"'),
        ("colour: blue\n", ("default", "x"), 'line 1: unknown key "colour"'),
        ("ttl: soon\n", ("pin", "m", "x"), "line 1: ttl: Input should be a valid integer"),
        (
            "backends:\n  - {id: a, kind: llama, path: /a}\n  - {id: a, kind: sd, path: /b}\n",
            ("default", "a"),
            'line 3: duplicate backend id "a"',
        ),
    ],
)
def test_bad_config_file(
    cli: Cli, config_path: Path, text: str, args: tuple[str, ...], fragment: str
) -> None:
    write_config(config_path, text)
    assert_error_line(cli(*args), 1, fragment)
    assert config_path.read_text() == text


def test_usage_errors_exit_2_in_one_line(cli: Cli) -> None:
    result = cli("pin")
    assert result.code == 2
    assert result.err.startswith("error: ") and len(result.err.splitlines()) == 1
    assert cli("no-such-command").code == 2


def test_pin_unpin_set_unset_round_trip(cli: Cli, config_path: Path) -> None:
    write_config(config_path, HAND_WRITTEN)
    before = config_path.read_text()
    assert cli("pin", "not-discovered-yet", "llama-src").code == 0
    result = cli(
        "--json",
        "set",
        "not-discovered-yet",
        "ctx=8192",
        "vllm_gpu_util=0.5",
        "unlisted=true",
        "extra_args=--seed 7 --temp 0",
        "llama_swap={aliases: [nd]}",
    )
    assert result.code == 0
    document = json.loads(result.out)
    assert document.pop("changes")["config"] == str(config_path)  # issue 33
    assert document == {
        "model": "not-discovered-yet",
        "backend": "llama-src",
        "ctx": 8192,
        "vllm_gpu_util": 0.5,
        "extra_args": "--seed 7 --temp 0",
        "unlisted": True,
        "llama_swap": {"aliases": ["nd"]},
        "warnings": [
            'no discovered model "not-discovered-yet"; it is kept for when the model appears'
        ],
        "message": "set ctx=8192, vllm_gpu_util=0.5, unlisted=true, extra_args=--seed 7 --temp 0, "
        'llama_swap={aliases: [nd]} for "not-discovered-yet"',
        "changed": True,
    }
    assert (
        cli(
            "unset",
            "not-discovered-yet",
            "ctx",
            "vllm_gpu_util",
            "unlisted",
            "extra_args",
            "llama_swap",
        ).code
        == 0
    )
    assert cli("unpin", "not-discovered-yet").out.startswith('unpinned "not-discovered-yet"')
    assert config_path.read_text() == before  # the empty override record is gone again
    again = cli("unpin", "not-discovered-yet")
    assert again.code == 0 and "has no pin" in again.out


def test_quiet_prints_nothing(cli: Cli, config_path: Path) -> None:
    write_config(config_path, HAND_WRITTEN)
    result = cli("-q", "pin", "m", "llama-src")
    assert (result.code, result.out, result.err) == (0, "", "")


def test_remove_manual_row_warns_about_its_pins(cli: Cli, config_path: Path) -> None:
    write_config(config_path, HAND_WRITTEN)
    cli("pin", "a", "vllm-venv")
    result = cli("backends", "remove", "vllm-venv")
    assert result.code == 0
    assert result.err == 'warning: pins to "vllm-venv" are now stale and fall back: a\n'


def test_config_flag_and_env(tmp_path: Path, cli: Cli) -> None:
    other = write_config(tmp_path / "elsewhere.yaml", HAND_WRITTEN)
    assert cli("--config", str(other), "pin", "m", "llama-src").code == 0
    assert "backend: llama-src" in other.read_text()


@pytest.mark.slow(reason="16 interpreters at once: the lock is between processes")
def test_sixteen_concurrent_pins_all_land(config_path: Path) -> None:
    write_config(config_path, HAND_WRITTEN)
    env = {**os.environ, "BACKENDMGR_CONFIG": str(config_path)}
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "backendmgr",
                "pin",
                f"model-{i:02d}",
                "llama-src" if i % 2 else "vllm-venv",
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(16)
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    listed = run_in_process("--json", "backends")  # the config reads back whole
    assert listed.code == 0, listed
    from backendmgr.config.store import ConfigStore

    models = ConfigStore(config_path).read().models
    for i in range(16):
        assert models[f"model-{i:02d}"].backend == ("llama-src" if i % 2 else "vllm-venv")
    assert models["qwen3-8b-q4_k_m"].ctx == 32768
    assert "# daily driver" in config_path.read_text()


def test_set_refuses_an_alias_another_model_has(cli: Cli, config_path: Path) -> None:
    """The whole config's rules run on the edited settings: llama-swap refuses two models
    sharing an alias, so ``set`` does, and the file stays as it was."""
    write_config(config_path, HAND_WRITTEN)
    assert cli("set", "qwen3-8b-q4_k_m", "llama_swap={aliases: [chat]}").code == 0
    before = config_path.read_text()
    result = cli("set", "other-model", "llama_swap={aliases: [chat]}")
    assert_error_line(
        result, 2, 'alias "chat" is given to both "qwen3-8b-q4_k_m" and "other-model"'
    )
    assert config_path.read_text() == before
