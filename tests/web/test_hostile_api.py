"""Hostile override values through ``POST /api/models/{id}/set`` give the CLI's verdicts
(issue 28): the same refusal line, with exit 2, or the same success."""

from __future__ import annotations

import httpx
import pytest

from tests.support import Setup
from tests.support.cli import run_in_worker
from tests.support.hostile import CASES

MODEL = "qwen3-8b-q4_k_m"


@pytest.mark.asyncio
async def test_the_api_gives_the_clis_verdicts(client: httpx.AsyncClient, setup: Setup) -> None:
    refused = 0
    for key, value in CASES:
        before = setup.config.read_bytes()
        got = await client.post(f"/api/models/{MODEL}/set", json={"values": {key: value}})
        cli = await run_in_worker("set", MODEL, f"{key}={value}")
        if cli.code == 0:
            assert got.status_code == 200, (key, value, got.text)
            continue
        refused += 1
        assert cli.code == 2, (key, value, cli)
        assert got.status_code == 422 and got.json()["exit"] == 2, (key, value, got.text)
        assert cli.err.strip() == f"error: {got.json()['error']}", (key, value)
        assert setup.config.read_bytes() == before
    assert 0 < refused < len(CASES)
