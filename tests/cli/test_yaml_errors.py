"""Issue 33 (6): a YAML error in any file backendmgr reads (a lock, the config, a manifest)
names the file, the line and the column, in one line."""

from __future__ import annotations

import re
from pathlib import Path

from tests.support.cli import error_line, run_in_process

LINE_COLUMN = r" line (\d+) column (\d+): "


def test_a_lock_with_a_yaml_error_names_file_line_and_column(tmp_path: Path) -> None:
    lock = tmp_path / "backendmgr.lock"
    lock.write_text("format: 1\nbuilds:\n  - {id: a, assets: [x\n")
    line = error_line(run_in_process("sync", "--dry-run", str(lock)), 1)
    found = re.search(str(lock) + LINE_COLUMN, line)
    assert found is not None, line
    assert int(found.group(1)) >= 3 and "fix the YAML" in line


def test_a_config_with_a_yaml_error_names_file_line_and_column(config_path: Path) -> None:
    config_path.parent.mkdir(parents=True)
    config_path.write_text("ttl: 600\nmodels_dirs: [/a\nvram_budget_gb: 8\n")
    line = error_line(run_in_process("models"), 1)
    assert re.search(re.escape(str(config_path)) + LINE_COLUMN, line), line


def test_a_manifest_with_a_yaml_error_names_file_line_and_column(tmp_path: Path) -> None:
    manifests = tmp_path / "cfg" / "manifests"
    manifests.mkdir(parents=True)
    bad = manifests / "mine.yaml"
    bad.write_text("id: mine\nname: [unclosed\n")
    line = error_line(run_in_process("catalog"), 1)
    assert re.search(re.escape(str(bad)) + LINE_COLUMN, line), line
