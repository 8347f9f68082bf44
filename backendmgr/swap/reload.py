"""Proof that a running llama-swap took a change (issue 21, item 5).

llama-swap watches its config by polling (every 2 s) and logs "configuration reloaded" when it
has read a new file; a file it cannot use is logged as an error and the old one stays. Before a
mutation the tail of its log (``/logs``) is noted; afterwards the log is read again until it
shows a reload past that mark and ``/v1/models`` serves what the file now says — or a bounded
wait ends with a warning.
"""

from __future__ import annotations

import time
from pathlib import Path

import anyio

from ..errors import shown
from ..immutable import frozen
from .status import Unanswered, answers, compare_models, file_models, observe

__all__ = ["Mark", "Reloaded", "await_reload", "log_text"]

RELOADED = "configuration reloaded"
POLL_S = 0.2
WAIT_S = 15.0


@frozen(slots=True)
class Mark:
    """A running llama-swap before a change: where, its log's last line, the file's digest."""

    url: str
    config: Path
    anchor: str
    digest: str | None


@frozen(slots=True)
class Reloaded:
    ok: bool
    message: str
    seconds: float


async def log_text(url: str) -> str:
    """llama-swap's recent log (its own bounded history), its last MAX_ANSWER bytes, read
    within the total deadline of :func:`answers` (:class:`Unanswered` otherwise)."""
    (body,) = await answers(url, ["/logs"], keep_tail=True)
    return body.decode("utf-8", "replace")


def last_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def after(text: str, anchor: str) -> str:
    """The part of the log written after the line ``anchor`` (all of it when the anchor has
    scrolled out of llama-swap's history)."""
    if not anchor:
        return text
    index = text.rfind(anchor)
    return text[index + len(anchor) :] if index >= 0 else text


def _refusal(tail: str) -> str | None:
    for line in tail.splitlines():
        low = line.lower()
        if "request " in low:  # an access-log line names a path, not a reload
            continue
        if ("reload" in low or "config" in low) and ("error" in low or "fail" in low):
            return shown(line, 300)
    return None


async def await_reload(mark: Mark, *, timeout: float = WAIT_S) -> Reloaded:
    """Wait until llama-swap has reloaded ``mark.config`` and serves what it says."""
    started = time.monotonic()
    problems: list[str] = ["no reload in its log yet"]
    with anyio.move_on_after(timeout):
        while True:
            try:
                tail = after(await log_text(mark.url), mark.anchor)
            except Unanswered as exc:
                problems = [str(exc)]
            else:
                refused = _refusal(tail)
                if refused:
                    return Reloaded(
                        False,
                        f"llama-swap did not take {mark.config}: {refused}; it keeps the old one",
                        time.monotonic() - started,
                    )
                if RELOADED in tail:
                    seen = await observe(mark.url)
                    try:
                        written = file_models(mark.config.read_text(encoding="utf-8"))
                    except (OSError, ValueError) as exc:
                        written, problems = {}, [f"{mark.config} cannot be read ({exc})"]
                    else:
                        problems = (
                            [seen.error] if seen.error else compare_models(seen.models, written)
                        )
                    if not problems:
                        spent = time.monotonic() - started
                        return Reloaded(
                            True,
                            f"llama-swap reloaded {mark.config} ({len(written)} models) "
                            f"in {spent:.1f} s",
                            spent,
                        )
            await anyio.sleep(POLL_S)
    return Reloaded(
        False,
        f"llama-swap has not reloaded {mark.config} after {timeout:g} s ({'; '.join(problems)}); "
        'is it watching the file? "backendmgr status" shows what it serves',
        time.monotonic() - started,
    )
