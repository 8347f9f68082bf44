"""What one mutation changed on disk, gathered where it happens (issue 33): the config file
written, the llama-swap config rewritten and the models whose entries changed in it.

A command (or a request) opens :func:`collecting`; the config store and the generator report
into it from wherever they run, worker threads included (the record is shared, not copied);
the result then carries it as ``changes``. Outside :func:`collecting` nothing is kept.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterable, Iterator
from contextvars import ContextVar
from typing import Any

__all__ = ["Record", "collecting", "config_written", "current", "generated"]


_SHOWN = 12  # model ids a person is shown on the line that says a file was rewritten


class Record:
    """What one command changed so far (a plain class: made once per command, and every edit
    loads it, where a dataclass would cost its generated ``__init__``)."""

    __slots__ = ("config", "lock", "models", "output")

    def __init__(
        self,
        config: str | None = None,
        output: str | None = None,
        models: list[str] | None = None,
    ) -> None:
        self.config = config  # the config file, when its text changed
        self.output = output  # the llama-swap config, when it was rewritten
        self.models: list[str] = [] if models is None else models  # ids whose entries changed
        self.lock = threading.Lock()

    def document(self) -> dict[str, Any] | None:
        """``{"config": path, "generated": {"output": path, "models": [ids]}}``, leaving out
        what did not change; ``None`` when nothing did."""
        data: dict[str, Any] = {}
        if self.config:
            data["config"] = self.config
        if self.output:
            data["generated"] = {"output": self.output, "models": sorted(self.models)}
        return data or None

    def lines(self) -> list[str]:
        """The same for people: a line per file."""
        said = []
        if self.config:
            said.append(f"updated {self.config}")
        if self.output:
            ids = sorted(self.models)
            which = ", ".join(ids[:_SHOWN]) if ids else "no entry changed"
            if len(ids) > _SHOWN:  # the --json document lists them all
                which += f" and {len(ids) - _SHOWN} more"
            said.append(f"rewrote {self.output} ({which})")
        return said


_current: ContextVar[Record | None] = ContextVar("backendmgr_changes", default=None)


@contextlib.contextmanager
def collecting() -> Iterator[Record]:
    """Gather what the code run inside changes."""
    record = Record()
    token = _current.set(record)
    try:
        yield record
    finally:
        _current.reset(token)


def current() -> Record | None:
    """The record of the command being run, if one is collecting."""
    return _current.get()


def config_written(path: object) -> None:
    record = _current.get()
    if record is not None:
        with record.lock:
            record.config = str(path)


def generated(output: object, models: Iterable[str]) -> None:
    record = _current.get()
    if record is not None:
        with record.lock:
            record.output = str(output)
            record.models = sorted(set(record.models) | set(models))
