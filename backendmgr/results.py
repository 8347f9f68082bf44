"""What an operation returns: one typed document that carries the sentence for people too.

Every read of the Manager returns a :class:`Result` (see :mod:`backendmgr.api_models`) and
every mutation an :class:`Outcome`; the CLI prints ``message`` (or, with ``--json``, the whole
document) and the HTTP API sends the same document, so the two cannot disagree.

Results are plain standard-library dataclasses: backendmgr builds them and never reads them
from what a person wrote, so they need neither pydantic nor a record's checks (issue 30: the
read path does not import pydantic). They are not frozen: a mutation's result is filled in as
the operation goes (``warn``, what it changed on disk, a dry run's details).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar, cast

__all__ = ["Outcome", "Result"]

_PENDING = "_result_pending"
_GIVEN = "_result_given"


class Result:
    """The base of every result. A document shows the keys the Manager set (the keyword
    arguments it was made with, and each field assigned since), so a key added with a default
    stays out of documents that never carried it, while one set to its default (``None``) is
    shown as set. pydantic (the OpenAPI schemas, tests) reads subclasses as dataclasses that
    refuse unknown keys and take ``class``/``from`` or the field's own name."""

    __pydantic_config__: ClassVar[dict[str, Any]] = {"extra": "forbid", "populate_by_name": True}

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        self = super().__new__(cls)
        object.__setattr__(self, _PENDING, kwargs.keys())
        return self

    def __post_init__(self) -> None:
        # from here on, each assignment marks its field as set; one made by pydantic (no
        # keywords seen) shows every field, as one read back from a whole document
        state = self.__dict__
        given = state.pop(_PENDING, None)
        state[_GIVEN] = set(given) if given is not None else {f.name for f in _fields(self)}

    def __setattr__(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)
        given = self.__dict__.get(_GIVEN)
        if given is not None:
            given.add(name)

    def shown(self) -> list[str]:
        """The names of the fields its document carries, in field order."""
        given = self.__dict__.get(_GIVEN)
        names = [f.name for f in _fields(self)]
        return names if given is None else [n for n in names if n in given]


def _fields(result: Result) -> tuple[dataclasses.Field[Any], ...]:
    return dataclasses.fields(cast(Any, result))


@dataclass(kw_only=True)
class Outcome(Result):
    """The result of one mutation: the data under SPEC §13's keys, plus ``message`` (the human
    line), ``changed`` (False for a dry run or a no-op) and ``warnings`` (also printed on
    stderr by the CLI)."""

    message: str
    changed: bool = True
    warnings: list[str] = field(default_factory=list)
    # what the command changed on disk (issue 33): ``{"config": path, "generated": {"output":
    # path, "models": [ids]}, "reload": {"ok", "message"}}``, only what happened
    changes: dict[str, Any] | None = None

    def shown(self) -> list[str]:
        """``changed`` always (last when the Manager left it at True), ``warnings`` last and
        only when there are any."""
        names = [n for n in super().shown() if n != "warnings"]
        if "changed" not in names:
            names.append("changed")
        if self.warnings:
            names.append("warnings")
        return names

    def warn(self, *warnings: str) -> None:
        """Add warnings found after the result was built (a missing checksum, a GPU build that
        sees no GPU)."""
        if warnings:
            self.warnings = [*self.warnings, *warnings]
