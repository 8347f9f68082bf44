"""Hostile values against the real llama-swap (issue 28): a recording stand-in model server,
and one llama-swap run that starts every model of a generated file and gives back what each
process was started with."""

from __future__ import annotations

import json
import shlex
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from tests.support.swap import SWAP_BIN, free_port, wait_for

# ``set`` KEY and VALUE pairs llama-swap would break on, before issue 28: some to take, some to
# refuse (the CLI, the API and the Ansible module must give the same verdicts)
CASES: list[tuple[str, str]] = [
    ("env", shlex.quote("HF_ENDPOINT=https://hf.example/api?x=1")),
    ("env", shlex.quote("A=why? yes")),
    ("env", "D=${foo}"),
    ("env", "D=a\u202eb"),
    ("extra_args", "--x ${foo} '#c' 'a: b'"),
    ("extra_args", "--x 'a\nb'"),
    ("llama_swap", '{"env": ["lower=1"]}'),
    ("llama_swap", '{"aliases": ["why?", "{{ x }}"]}'),
    ("llama_swap", '{"description": "d ${foo}"}'),
    ("vllm_tokenizer", "org/${foo}"),
]


# A shell stand-in: the argv and environment it was started with, NUL-separated, into a file
# named by its pid; then it exits (llama-swap reports the start as failed, at once).
RECORDER = """#!/bin/sh
printf '%s\\0' "$@" > "$RECORD_DIR/$$.argv"
env -0 > "$RECORD_DIR/$$.env"
exit 3
"""


def recorder(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(RECORDER)
    path.chmod(0o755)
    return path


Started = tuple[list[str], dict[str, str]]


def _records(folder: Path) -> list[Started]:
    out = []
    for argv_file in folder.glob("*.argv"):
        argv = argv_file.read_bytes().decode("utf-8", "surrogateescape").split("\0")[:-1]
        env_raw = argv_file.with_suffix(".env").read_bytes().decode("utf-8", "surrogateescape")
        env = dict(e.split("=", 1) for e in env_raw.split("\0") if "=" in e)
        out.append((argv, env))
    return out


def serve_all(
    generated: Path, record_dir: Path, env: dict[str, str]
) -> tuple[set[str], list[Started]]:
    """Start the real llama-swap on ``generated``: the ids ``/v1/models`` lists, and the argv
    and environment of every model process it started when each model was asked for (the
    file puts them in one group that does not swap, so they start at once)."""
    record_dir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [str(SWAP_BIN), "-config", str(generated), "-listen", f"127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**env, "RECORD_DIR": str(record_dir)},
    )
    try:

        def listed() -> set[str] | None:
            if proc.poll() is not None:
                raise AssertionError(f"llama-swap refused {generated}: {proc.communicate()[1]}")
            try:
                answer = httpx.get(f"{url}/v1/models", timeout=2, trust_env=False)
            except httpx.HTTPError:
                return None
            if answer.status_code != 200:
                return None
            return {m["id"] for m in answer.json()["data"]}

        ids = wait_for(listed, timeout=20, what=f"llama-swap to load {generated}")

        def start(model_id: str) -> None:
            from urllib.parse import quote

            httpx.get(
                f"{url}/upstream/{quote(model_id, safe='')}/health", timeout=30, trust_env=False
            )

        with ThreadPoolExecutor(8) as pool:
            list(pool.map(start, sorted(ids)))
        return ids, _records(record_dir)
    finally:
        proc.terminate()
        proc.wait(10)


def all_in_one_group(ids: list[str]) -> str:
    """A ``llama_swap`` passthrough (JSON is YAML) whose group runs every model at once."""
    return json.dumps({"groups": {"all": {"swap": False, "exclusive": False, "members": ids}}})
