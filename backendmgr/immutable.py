"""Immutable dataclasses, checked by the type checker instead of at every start.

Every immutable dataclass of the package is declared with :func:`frozen`, which ``mypy
--strict`` (run by CI) treats as ``@dataclass(frozen=True)``: assigning to a field, or
deleting one, is a type error. At run time it makes a plain dataclass, because on Python 3.11
each method a dataclass generates is compiled by its own ``exec`` (~0.15 ms), and a frozen
class adds two (``__setattr__``, ``__delattr__``) and an ``__init__`` that assigns through
``object.__setattr__``: 0.57 ms against 0.27 ms for a 10-field class, paid for every class at
every start (issue 30: 20-50 classes a command, 12-17% of its CPU). A class that compares by
its fields keeps the hash by its fields that ``frozen=True`` gives it.

A leaf module, so that any module can declare a record without importing the rest.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable
from typing import Any, TypeVar, overload

__all__ = ["frozen"]

T = TypeVar("T")


@overload
def frozen(cls: type[T], /) -> type[T]: ...
@overload
def frozen(
    *, kw_only: bool = False, slots: bool = False, eq: bool = True, repr: bool = True
) -> Callable[[type[T]], type[T]]: ...
@typing.dataclass_transform(frozen_default=True, field_specifiers=(dataclasses.field,))
def frozen(
    cls: type[T] | None = None,
    /,
    *,
    kw_only: bool = False,
    slots: bool = False,
    eq: bool = True,
    repr: bool = True,
) -> Any:
    """``@dataclass(frozen=True, ...)`` to the type checker, a plain dataclass at run time
    (see the module's text); ``eq`` brings the hash by fields, as ``frozen=True`` does."""

    def make(cls: type[T]) -> type[T]:
        return dataclasses.dataclass(
            cls, kw_only=kw_only, slots=slots, eq=eq, repr=repr, unsafe_hash=eq
        )

    return make if cls is None else make(cls)
