"""Load a generated file into the real llama-swap, once per test run: the JSON schema is not
llama-swap's parser (it checks macros, ports, groups and more that no schema says)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import httpx

from backendmgr.swap.status import file_models
from tests.support.swap import SWAP_BIN, free_port, wait_for

_loaded: list[Path] = []


def load_once(generated: Path) -> None:
    """Start llama-swap on ``generated``; it must come up and serve exactly its models. Only
    the first call per run does it (a machine without the binary skips it: see helpers)."""
    if _loaded or not SWAP_BIN.is_file():
        return
    _loaded.append(generated)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [str(SWAP_BIN), "-config", str(generated), "-listen", f"127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:

        def served() -> dict[str, object] | None:
            if proc.poll() is not None:
                raise AssertionError(f"llama-swap refused {generated}: {proc.communicate()[1]}")
            try:
                answer = httpx.get(f"{url}/v1/models", timeout=1, trust_env=False)
            except httpx.HTTPError:
                return None
            return answer.json() if answer.status_code == 200 else None

        models = wait_for(served, timeout=20, what=f"llama-swap to load {generated}")
        ids = {m["id"] for m in models["data"]}
        assert ids == set(file_models(generated.read_text(encoding="utf-8")))
    finally:
        proc.terminate()
        proc.wait(10)
