"""What a venv build's vLLM can do, asked of its own Python once at install: the tool-call
parsers it registers (the emitter trusts its own table where this cannot tell)."""

from __future__ import annotations

import json
import re
from pathlib import Path

__all__ = ["PROBE_MARK", "PROBE_TIMEOUT_S", "probe_tool_parsers"]

PROBE_MARK = "backendmgr-tool-parsers:"
PROBE_TIMEOUT_S = 120.0
"""Importing vLLM's parser registry pulls in torch: slow, but bounded."""
PROBE_OUTPUT_LIMIT = 256 * 1024
PROBE_MAX_NAMES = 1000
_PARSER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
# The registry moved from vllm.entrypoints.openai.tool_parsers to vllm.tool_parsers; eager
# registrations live in ``tool_parsers``, lazy ones (newer builds) in ``lazy_parsers``. vLLM logs
# to stdout, so the answer is the one line that carries the mark.
_PROBE = f"""
import json
names = None
for path in ("vllm.tool_parsers", "vllm.entrypoints.openai.tool_parsers"):
    try:
        manager = __import__(path, fromlist=["ToolParserManager"]).ToolParserManager
    except Exception:
        continue
    found = set()
    for attr in ("tool_parsers", "lazy_parsers"):
        table = getattr(manager, attr, None)
        if isinstance(table, dict):
            found.update(k for k in table if isinstance(k, str))
    names = sorted(found)
    break
print({PROBE_MARK!r} + json.dumps(names), flush=True)
"""


async def probe_tool_parsers(python: Path) -> list[str] | None:
    """The tool-call parsers the venv's vLLM registers, asked of its own Python once.

    Any failure (no registry, a crash, a timeout, too much output, a malformed answer) is
    "unknown" (None), never a failed install: the emitter then trusts its table.
    """
    try:
        out = await _bounded_output([str(python), "-I", "-c", _PROBE], PROBE_OUTPUT_LIMIT)
    except OSError:  # TimeoutError is one
        return None
    if out is None:
        return None
    for raw in reversed(out.splitlines()):
        line = raw.decode("utf-8", "replace").strip()
        if line.startswith(PROBE_MARK):
            return _parser_names(line[len(PROBE_MARK) :])
    return None


def _parser_names(text: str) -> list[str] | None:
    try:
        names = json.loads(text)
    except ValueError:
        return None
    if not isinstance(names, list) or len(names) > PROBE_MAX_NAMES:
        return None
    if not all(isinstance(n, str) and _PARSER_NAME.fullmatch(n) for n in names):
        return None
    return sorted(set(names))


async def _bounded_output(argv: list[str], limit: int) -> bytes | None:
    """The command's stdout if it exits 0 within ``limit`` bytes and the probe's time; the
    process and anything it started are stopped on every way out (one mechanism:
    :func:`~backendmgr.install.probe.run_in_group`)."""
    from .probe import run_in_group

    done = await run_in_group(argv, timeout=PROBE_TIMEOUT_S, limit=limit, merge=False)
    return done.out if done.code == 0 and not done.overflowed else None
