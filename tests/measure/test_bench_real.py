"""``bench`` against the REAL llama-server on the CPU (issue 32): a real figure, recorded."""

from __future__ import annotations

import json
from collections.abc import Callable

from tests.support.cli import CliResult
from tests.support.realllama import RealLlama


def test_bench_records_a_real_figure(real_llama: RealLlama, cli: Callable[..., CliResult]) -> None:
    args = ("--repeat", "2", "--prompt", "32", "--tokens", "8")
    result = cli("--json", "bench", "tiny", "--build", "b11434", *args)
    assert result.code == 0, result
    (record,) = json.loads(result.out)
    assert record["model"] == "tiny" and record["build"] == real_llama.build
    assert record["ok"] and record["runs"] == 2
    assert record["predicted_per_second"] > 0 and record["prompt_per_second"] > 0
    assert record["predicted_tokens"] == 8 and record["prompt_tokens"] >= 32
    assert record["measured_by"] == "llama-server timings"
    assert record["argv"][0] == str(real_llama.server)
    stored = json.loads((real_llama.home / "bench.json").read_text())["models"]["tiny"]
    assert [r["predicted_per_second"] for r in stored] == [record["predicted_per_second"]]
