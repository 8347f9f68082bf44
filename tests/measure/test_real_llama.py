"""``tune`` against a real llama-server on the CPU, by resident memory (issue 22).

Needs ``llama-server`` on PATH and a small real GGUF named by ``BACKENDMGR_TEST_GGUF`` (tests
never download one); skipped otherwise, saying which is missing.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.cli import CliResult

SERVER = shutil.which("llama-server")
GGUF = os.environ.get("BACKENDMGR_TEST_GGUF", "")

pytestmark = [
    pytest.mark.skipif(SERVER is None, reason="no llama-server on PATH"),
    pytest.mark.skipif(
        not Path(GGUF).is_file(), reason="BACKENDMGR_TEST_GGUF does not name a small GGUF file"
    ),
]


def test_tune_a_real_gguf_on_the_cpu(
    tmp_path: Path, config_path: Path, cli: Callable[..., CliResult]
) -> None:
    assert SERVER is not None
    models = tmp_path / "models"
    models.mkdir()
    (models / "tiny.gguf").symlink_to(Path(GGUF).resolve())
    config_path.parent.mkdir(parents=True, exist_ok=True)
    config_path.write_text(
        json.dumps(
            {
                "models_dirs": [str(models)],
                "backends": [{"id": "real", "kind": "llama", "path": SERVER}],
                "models": {"tiny": {"extra_args": "-ngl 0 -t 2"}},
            }
        )
    )
    budget = Path(GGUF).stat().st_size / 2**30 + 1.0
    result = cli("--json", "tune", "tiny", "--budget", f"{budget:.2f}", "--max-attempts", "4")
    assert result.code == 0, result
    (tuned,) = json.loads(result.out)["results"]
    assert tuned["ok"]
    assert tuned["ctx"] % 4096 == 0 or tuned["ctx"] < 4096
    assert tuned["measured_by"] == "resident memory" and tuned["measured_gib"] <= budget
    assert all(not t["ok"] for t in tuned["trials"] if t["ctx"] > tuned["ctx"])
    argv = json.loads(cli("--json", "cmd", "tiny").out)["argv"]
    assert argv[argv.index("-c") + 1] == str(tuned["ctx"])
