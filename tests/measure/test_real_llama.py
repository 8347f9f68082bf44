"""``tune`` against the REAL llama-server on the CPU, by resident memory (issue 22).

The real llama.cpp build comes from ``../shared/llama.cpp`` through the loopback release
server (the ``real_llama`` fixture, ``tests/support/realllama.py``); skipped without it.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from tests.support.cli import CliResult
from tests.support.realllama import REAL_GGUF, RealLlama


def test_tune_a_real_gguf_on_the_cpu(real_llama: RealLlama, cli: Callable[..., CliResult]) -> None:
    budget = REAL_GGUF.stat().st_size / 2**30 + 1.0
    result = cli("--json", "tune", "tiny", "--budget", f"{budget:.2f}", "--max-attempts", "4")
    assert result.code == 0, result
    (tuned,) = json.loads(result.out)["results"]
    assert tuned["ok"]
    assert tuned["backend"] == "llama-server"  # the installed build, activated
    assert tuned["ctx"] % 4096 == 0 or tuned["ctx"] < 4096
    assert tuned["measured_by"] == "resident memory" and tuned["measured_gib"] <= budget
    assert all(not t["ok"] for t in tuned["trials"] if t["ctx"] > tuned["ctx"])
    argv = json.loads(cli("--json", "cmd", "tiny").out)["argv"]
    assert argv[0] == str(real_llama.server)
    assert argv[argv.index("-c") + 1] == str(tuned["ctx"])
