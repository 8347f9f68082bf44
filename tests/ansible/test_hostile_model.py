"""Hostile override values through the Ansible model module give the CLI's verdicts (issue 28):
a value the CLI refuses fails the task with the CLI's one line, a value it takes succeeds, and
the config each leaves is the one the CLI leaves."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.cli import run_in_process
from tests.support.ggufs import write_gguf
from tests.support.hostile import CASES
from tests.support.paths import ROOT

BIN = Path(sys.executable).parent
pytestmark = pytest.mark.skipif(
    not (BIN / "ansible-playbook").is_file(), reason="ansible-core is not installed (test extra)"
)


def _config(root: Path) -> Path:
    models = root / "models"
    write_gguf(models / "chat.gguf", "llama", layers=2, ctx=4096, embd=256, heads=4, kv_heads=4)
    config = root / "cfg" / "config.yaml"
    config.parent.mkdir(parents=True)
    config.write_text(json.dumps({"models_dirs": [str(models)]}) + "\n")
    return config


def _playbook(tmp: Path, config: Path, home: Path, out: Path) -> Path:
    """One task per case, each value tagged !unsafe so Ansible templates none of it."""
    tasks = []
    for i, (key, value) in enumerate(CASES):
        tasks.append(
            f"    - name: case {i}\n"
            "      backendmgr.fleet.backendmgr_model:\n"
            f"        executable: {json.dumps(str(BIN / 'backendmgr'))}\n"
            f"        home: {json.dumps(str(home))}\n"
            f"        config: {json.dumps(str(config))}\n"
            "        name: chat\n"
            f"        settings:\n          {key}: !unsafe {json.dumps(value)}\n"
            f"      register: r{i}\n"
            "      ignore_errors: true\n"
        )
    results = ", ".join(f"r{i}" for i in range(len(CASES)))
    tasks.append(
        "    - name: results\n"
        "      ansible.builtin.copy:\n"
        f"        content: '{{{{ [{results}] | to_json }}}}'\n"
        f"        dest: {json.dumps(str(out))}\n"
    )
    book = tmp / "play.yml"
    book.write_text("- hosts: localhost\n  gather_facts: false\n  tasks:\n" + "".join(tasks))
    return book


def test_the_model_module_gives_the_clis_verdicts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cli_config = _config(tmp_path / "cli")
    monkeypatch.setenv("BACKENDMGR_CONFIG", str(cli_config))
    monkeypatch.setenv("BACKENDMGR_HOME", str(tmp_path / "cli" / "home"))
    verdicts = []
    for key, value in CASES:
        result = run_in_process("set", "chat", f"{key}={value}")
        lines = result.err.strip().splitlines()
        refused = [ln for ln in lines if ln.startswith("error: ")]
        assert result.code in (0, 2) and len(refused) == (result.code == 2), (key, value, result)
        verdicts.append(refused[0].removeprefix("error: ") if refused else None)
    assert None in verdicts and any(verdicts)

    ans_config = _config(tmp_path / "ans")
    out = tmp_path / "results.json"
    book = _playbook(tmp_path, ans_config, tmp_path / "ans" / "home", out)
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("BACKENDMGR_", "ANSIBLE_")) and k not in ("GITHUB_TOKEN", "GH_TOKEN")
    }
    env.update(
        ANSIBLE_HOME=str(tmp_path / "ansible-home"),
        ANSIBLE_LOCAL_TEMP=str(tmp_path / "ansible-tmp"),
        ANSIBLE_COLLECTIONS_PATH=str(ROOT / "ansible"),
        ANSIBLE_COLLECTIONS_SCAN_SYS_PATH="false",
        ANSIBLE_NOCOLOR="1",
        ANSIBLE_RETRY_FILES_ENABLED="false",
        ANSIBLE_LOCALHOST_WARNING="false",
        ANSIBLE_INVENTORY_UNPARSED_WARNING="false",
        BACKENDMGR_GPU="none",
        BACKENDMGR_OFFLINE="1",
        PATH=f"{BIN}:{env.get('PATH', '')}",
    )
    done = subprocess.run(
        [
            str(BIN / "ansible-playbook"),
            "-e",
            f"ansible_python_interpreter={sys.executable}",
            str(book),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert out.is_file(), done.stdout + done.stderr
    results = json.loads(out.read_text())
    for (key, value), verdict, result in zip(CASES, verdicts, results, strict=True):
        if verdict is None:
            assert not result.get("failed"), (key, value, result)
        else:
            assert result.get("failed") and verdict in result["msg"], (key, value, verdict, result)
    # the same values leave the same stored overrides
    ans_text = ans_config.read_text().replace(str(tmp_path / "ans"), str(tmp_path / "cli"))
    assert ans_text == cli_config.read_text()
