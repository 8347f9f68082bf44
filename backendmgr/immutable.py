"""Immutable dataclasses, checked by the type checker instead of at every start.

Every immutable dataclass of the package is declared with :func:`frozen`, which ``mypy
--strict`` (run by CI) treats as ``@dataclass(frozen=True)``: assigning to a field, or
deleting one, is a type error. At run time it makes a plain dataclass, because on Python 3.11
each method a dataclass generates is compiled by its own ``exec`` (~0.15 ms), and a frozen
class adds two (``__setattr__``, ``__delattr__``) and an ``__init__`` that assigns through
``object.__setattr__``: 0.57 ms against 0.27 ms for a 10-field class, paid for every class at
every start (issue 30: 20-50 classes a command, 12-17% of its CPU). For the same reason a
record has no ``__repr__`` and compares as any object unless it asks (``repr=True``,
``eq=True``: the config's records, requests, receipts); one that compares by its fields keeps
the hash by its fields that ``frozen=True`` gives it.

A leaf module, so that any module can declare a record without importing the rest.
"""

from __future__ import annotations

import dataclasses
import operator
import typing
from collections.abc import Callable
from typing import Any, TypeVar, overload

__all__ = ["by_fields_eq", "by_fields_hash", "frozen"]

T = TypeVar("T")


@overload
def frozen(cls: type[T], /) -> type[T]: ...
@overload
def frozen(
    *, kw_only: bool = False, slots: bool = False, eq: bool = False, repr: bool = False
) -> Callable[[type[T]], type[T]]: ...
@typing.dataclass_transform(
    frozen_default=True, eq_default=False, field_specifiers=(dataclasses.field,)
)
def frozen(
    cls: type[T] | None = None,
    /,
    *,
    kw_only: bool = False,
    slots: bool = False,
    eq: bool = False,
    repr: bool = False,
) -> Any:
    """``@dataclass(frozen=True, ...)`` to the type checker, a plain dataclass at run time
    (see the module's text). No ``__repr__`` and no comparison by fields unless asked
    (``repr=True``, ``eq=True``): most records are built, read and dropped, and each generated
    method costs its start-up; ``eq`` brings the hash by fields, as ``frozen=True`` does."""

    def make(cls: type[T]) -> type[T]:
        made = dataclasses.dataclass(cls, kw_only=kw_only, slots=slots, eq=False, repr=repr)
        if eq:
            made.__eq__ = by_fields_eq  # type: ignore[method-assign]
            made.__hash__ = by_fields_hash  # type: ignore[method-assign]
        return made

    return make if cls is None else make(cls)


_KEYS: dict[type, tuple[Callable[[Any], tuple[Any, ...]], Callable[[Any], tuple[Any, ...]]]] = {}


def _getter(names: list[str]) -> Callable[[Any], tuple[Any, ...]]:
    """The values of ``names`` of a record, as one tuple (``attrgetter``'s own for two or more)."""
    if len(names) >= 2:
        return operator.attrgetter(*names)
    return lambda record: tuple(getattr(record, name) for name in names)


def _keys(cls: type) -> tuple[Callable[[Any], tuple[Any, ...]], Callable[[Any], tuple[Any, ...]]]:
    """What ``cls``'s records compare and hash by, as dataclasses picks them (per field:
    ``compare``; ``hash``, else ``compare``), made at the first comparison."""
    found = _KEYS.get(cls)
    if found is None:
        fields = dataclasses.fields(cls)
        compared = [f.name for f in fields if f.compare]
        hashed = [f.name for f in fields if (f.compare if f.hash is None else f.hash)]
        found = _KEYS[cls] = (_getter(compared), _getter(hashed))
    return found


def by_fields_eq(self: Any, other: object) -> Any:
    """The ``__eq__`` ``dataclass(eq=True)`` makes (the same class, the fields compared in
    order as one tuple), written once: dataclasses compiles one per class at every start,
    ~1 ms for the config's three records (issue 30)."""
    if other.__class__ is self.__class__:
        key = _keys(self.__class__)[0]
        return key(self) == key(other)
    return NotImplemented


def by_fields_hash(self: Any) -> int:
    """The hash by fields ``dataclass(frozen=True)`` makes, written once (see
    :func:`by_fields_eq`)."""
    return hash(_keys(self.__class__)[1](self))
