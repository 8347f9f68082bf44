"""``bench``'s figures: medians and spreads, and a run against a stand-in vLLM (its ``usage``
timed by the wall clock, no prompt figure) — issue 32."""

from __future__ import annotations

import subprocess
from pathlib import Path

import anyio
import httpx

from backendmgr.measure.bench import Run, figures, prompt_text, run_once, spread_pct
from backendmgr.serve_check import free_port
from tests.support.measure_standins import write_server
from tests.support.wait import wait_until


def test_medians_and_spreads() -> None:
    runs = [Run(100.0, 10.0, 5, 8), Run(300.0, 12.0, 5, 8), Run(200.0, 11.0, 5, 8)]
    shown = figures(runs)
    assert shown["prompt_per_second"] == 200.0 and shown["predicted_per_second"] == 11.0
    assert shown["prompt_spread"] == 100.0  # (300 - 100) / 200
    assert shown["predicted_spread"] == round(2 / 11 * 100, 1)
    assert figures([Run(None, 5.0, None, 8)])["prompt_per_second"] is None
    assert spread_pct([0.0, 0.0]) == 0.0
    assert len(prompt_text(300).split()) == 300 and prompt_text(300).startswith(
        prompt_text(3) + " "
    )


MODEL_LEN = ("--max-model-len", "4096")


def test_a_vllm_run_is_timed_by_the_wall_clock(tmp_path: Path) -> None:
    exe = write_server(tmp_path / "vllm", slow=0.5)
    port = free_port()
    proc = subprocess.Popen(
        [str(exe), "serve", str(tmp_path / "model"), "--port", str(port), *MODEL_LEN],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:

        def healthy() -> bool:
            try:
                return httpx.get(f"{base}/health", timeout=1, trust_env=False).status_code == 200
            except httpx.HTTPError:
                return False

        wait_until(healthy, "the stand-in vLLM to serve", timeout=30, proc=proc)

        async def one() -> Run | str:
            async with httpx.AsyncClient(base_url=base, trust_env=False) as client:
                return await run_once(client, "vllm", "model", 20, 16)

        run = anyio.run(one)
    finally:
        proc.terminate()
        proc.wait(10)
    assert isinstance(run, Run), run
    assert run.prompt_per_second is None and run.prompt_tokens == 20
    assert run.predicted_tokens == 16
    assert 16 / 5 < run.predicted_per_second < 16 / 0.5  # 16 tokens in a bit over 0.5 s
