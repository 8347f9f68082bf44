"""What an operation returns, and :func:`dump`, the one way it becomes a JSON document.

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
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from .record import plain

__all__ = ["EVERY", "Outcome", "Result", "dump", "extra_keys"]

# a field shown whole, every default included (ConfigInfo's settings): dump's rule of the
# keys that were set is for results, not for what they carry
EVERY_KEY = "every"
EVERY: Mapping[str, Any] = {EVERY_KEY: True}
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
        state[_GIVEN] = set(given if given is not None else _layout(type(self)))

    def __setattr__(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)
        given = self.__dict__.get(_GIVEN)
        if given is not None:
            given.add(name)

    def shown(self) -> list[str]:
        """The names of the fields its document carries, in field order."""
        given = self.__dict__.get(_GIVEN)
        names = _layout(type(self))
        return list(names) if given is None else [n for n in names if n in given]


_LAYOUTS: dict[type, dict[str, tuple[str, bool, bool]]] = {}
_REAL = ("float", "float | None", float, float | None)


def _layout(cls: type) -> dict[str, tuple[str, bool, bool]]:
    """Each field of result class ``cls`` in order: its JSON key (its alias), whether it is
    shown whole (:data:`EVERY`), and whether it is a number with a fraction (``float``: an
    int given is shown as ``16.0``, as pydantic did); made once per class, as dumping a long
    list asks often."""
    found = _LAYOUTS.get(cls)
    if found is None:
        found = _LAYOUTS[cls] = {
            f.name: (f.metadata.get("alias", f.name), EVERY_KEY in f.metadata, f.type in _REAL)
            for f in dataclasses.fields(cls)
        }
    return found


@dataclass(kw_only=True, repr=False, eq=False)
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


def dump(value: Any, *, every: bool = False) -> Any:
    """The one way a result becomes JSON, for the CLI's ``--json`` and the HTTP API alike:
    aliases (``class``, ``from``) as SPEC §13 spells them, and only the keys the Manager set
    (:meth:`Result.shown`), so a key added with a default stays out of documents that never
    carried it. Lists and mappings item by item, a record whole (:func:`record.plain`).
    ``every``: every field, defaults included, by its own name (what a cache keeps to read
    back whole with :func:`record.load`)."""
    kind = type(value)
    if value is None or kind is str or kind is int or kind is float or kind is bool:
        return value
    if isinstance(value, str):  # ruamel.yaml's scalars as their plain values, as pydantic did
        return str(value)
    if isinstance(value, int | float):  # a number of ruamel's (its booleans are read as bool)
        return float(value) if isinstance(value, float) else int(value)
    if isinstance(value, Result):
        layout = _layout(type(value))
        out = {}
        for name in layout if every else value.shown():
            key, whole, real = layout[name]
            item = getattr(value, name)
            if real and type(item) is int:
                item = float(item)
            out[name if every else key] = dump(item, every=every or whole)
        return out
    if isinstance(value, list | tuple | set | frozenset):
        return [dump(item, every=every) for item in value]
    if isinstance(value, Mapping):
        return {key: dump(item, every=every) for key, item in value.items()}
    return plain(value)


def extra_keys(cls: type, document: Any, where: str = "") -> list[str]:
    """Keys a document carries that ``cls`` does not name (by their JSON spelling), searched
    through nested results and records: the test uses it to keep the results and the CLI's
    ``--json`` in step, naming the key a document carried that no result names."""
    if not isinstance(document, Mapping) or not dataclasses.is_dataclass(cls):
        return []
    fields = {f.metadata.get("alias", f.name): f for f in dataclasses.fields(cls)}
    hints = typing.get_type_hints(cls)
    found = [f"{where}{key}" for key in document if key not in fields]
    for key, f in fields.items():
        inner = next((t for t in _flat(hints[f.name]) if dataclasses.is_dataclass(t)), None)
        value = document.get(key)
        for item in value if isinstance(value, list) else [value]:
            if isinstance(inner, type):
                found += extra_keys(inner, item, f"{where}{key}.")
    return sorted(found)


def _flat(tp: Any) -> list[Any]:
    """``tp`` and every type inside it (``list[X] | None``: list, X, None)."""
    return [tp, *(a for arg in typing.get_args(tp) for a in _flat(arg))]
