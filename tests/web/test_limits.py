"""The API refuses each out-of-range value with the words the CLI uses (tests/test_requests.py
holds the CLI to the same ``backendmgr.limits``): one bound per parameter, declared once."""

from __future__ import annotations

import httpx
import pytest

from backendmgr.limits import PRUNE_KEEP, RELEASES_LIMIT, VERIFY_TIMEOUT_S, Bounds

# (method, path, field, bounds, refused values, an allowed value)
CASES: list[tuple[str, str, str, Bounds, list[float], float]] = [
    ("GET", "/api/releases/llama-server", "limit", RELEASES_LIMIT, [0, -1, 101], 100),
    ("POST", "/api/prune", "keep", PRUNE_KEEP, [-1, 1001], 1000),
    ("POST", "/api/verify", "timeout", VERIFY_TIMEOUT_S, [0, -3, 86401], 86400),
]


@pytest.mark.asyncio
async def test_the_api_refuses_what_the_cli_refuses(client: httpx.AsyncClient) -> None:
    for method, path, field, bounds, refused, allowed in CASES:
        for value in [*refused, allowed]:
            number = int(value) if field != "timeout" else value
            if method == "GET":
                answer = await client.get(path, params={field: str(number), "refresh": "false"})
            else:  # nothing runs when the value passes: a dry run, a model that is not there
                extra = {"keep": {"dry_run": True}, "timeout": {"models": ["no-such-model"]}}
                answer = await client.post(path, json={field: number, **extra[field]})
            problem = bounds.problem(float(value))
            if problem is None:
                assert answer.status_code != 422, (path, value, answer.text)
                continue
            assert answer.status_code == 422, (path, value, answer.text)
            assert answer.json()["error"] == f"{field}: {problem}", (path, value)
