"""``backendmgr status`` with the real llama-swap stopped, running, and running an older
config than the one backendmgr last wrote (a change llama-swap refused keeps the old one)."""

from __future__ import annotations

import json
import signal
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from tests.support.cli import CliResult
from tests.support.swap import (
    alive,
    answering,
    free_port,
    model_setup,
    needs_swap,
    ok,
    start_up,
    state,
    wait_for,
    web_status,
)

pytestmark = needs_swap


def test_status_stopped_running_and_running_an_old_config(
    tmp_path: Path,
    config_path: Path,
    with_swap: Path,
    cli: Callable[..., CliResult],
) -> None:
    model_setup(tmp_path, config_path)
    ok(cli("activate", "llama-swap@v250-any"))
    output = json.loads(ok(cli("--json", "generate")).out)["output"]

    stopped = json.loads(ok(cli("--json", "status")).out)
    assert stopped["running"] is False and stopped["output"] == output
    assert 'start it with "backendmgr up"' in stopped["message"]

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = start_up("--listen", f"127.0.0.1:{port}")
    try:
        wait_for(lambda: answering(url) or proc.poll() is not None, what="llama-swap")
        swap_pid = wait_for(lambda: (state(tmp_path / "home") or {}).get("pid"), what="state")
        httpx.post(
            f"{url}/v1/chat/completions",
            json={"model": "alpha-q4_k_m", "messages": [{"role": "user", "content": "hi"}]},
            timeout=60,
            trust_env=False,
        ).raise_for_status()
        seen = json.loads(ok(cli("--json", "status")).out)
        assert seen["running"] is True and seen["pid"] == swap_pid
        assert seen["version"] == "v250-5-g0bdb37"
        assert (seen["listen"], seen["url"]) == (f"127.0.0.1:{port}", url)
        assert seen["ui"] == f"{url}/ui/"
        assert (seen["config"], seen["watching"]) == (output, True)
        assert (seen["serves_output"], seen["current"]) == (True, True)
        assert seen["served"] == ["alpha-q4_k_m", "beta-q4_k_m"]
        assert [(m["model"], m["state"]) for m in seen["loaded"]] == [("alpha-q4_k_m", "ready")]
        assert seen["problems"] == []
        text = ok(cli("status")).out
        page = web_status()
        assert page["status"] == seen and 'id="swap"' in page["html"]
        assert f"pid {swap_pid}" in text and "holds the file backendmgr last wrote" in text

        # a change llama-swap refuses: it keeps serving the old file
        with config_path.open("a") as fh:
            fh.write("  groups: {g: {members: [no-such-model]}}\n")  # under llama_swap:
        refused = ok(cli("pin", "alpha-q4_k_m", "two"))
        assert "llama-swap did not take" in refused.err and "no-such-model" in refused.err
        old = json.loads(ok(cli("--json", "status")).out)
        assert old["running"] is True and old["current"] is False
        assert old["problems"] == [
            "it serves an older version of the file: older settings for: alpha-q4_k_m"
        ]
        shown = cli("status")
        assert "warning: it serves an older version of the file" in shown.err

        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)
        assert not alive(swap_pid)
        after = json.loads(ok(cli("--json", "status")).out)
        assert after["running"] is False
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


@pytest.mark.parametrize("leftover", ["stale", "garbage"])
def test_a_leftover_record_is_not_a_running_llama_swap(
    tmp_path: Path, cli: Callable[..., CliResult], leftover: str
) -> None:
    record = tmp_path / "home" / "swap" / "up.json"
    record.parent.mkdir(parents=True)
    if leftover == "stale":  # a kill -9 left it: the pid is gone
        record.write_text(
            json.dumps(
                {
                    "pid": 2**22 + 17,
                    "owner": 1,
                    "listen": "127.0.0.1:9",
                    "url": "http://127.0.0.1:9",
                    "config": "/x",
                    "exe": "/y",
                }
            )
        )
    else:
        record.write_bytes(b"\x00{not json")
    seen = json.loads(ok(cli("--json", "status")).out)
    assert seen["running"] is False
