"""Two field markers :mod:`backendmgr.record` lacks, for the records that people's files
(manifests, lock files) become: :class:`Length` (pydantic's ``min_length``/``max_length``, in its
words) and :class:`Tagged` (a union told apart by one key, pydantic's ``discriminator``).
Neither imports pydantic until pydantic builds a schema with it."""

from __future__ import annotations

import types
import typing
from typing import Any, Union, get_args, get_origin

from .record import After

__all__ = ["Length", "Tagged"]

_NOUN: dict[type, tuple[str, str]] = {str: ("String", "character"), dict: ("Dictionary", "item")}


class Length(After):
    """At least ``min`` / at most ``max`` characters or items; checked on every construction
    (an :class:`~backendmgr.record.After`), and by pydantic with its own messages."""

    __slots__ = ("max", "min")

    def __init__(self, *, min: int | None = None, max: int | None = None) -> None:
        super().__init__(self._check)
        self.min, self.max = min, max

    def _check(self, value: Any) -> Any:
        size = len(value)
        noun, unit = _NOUN.get(type(value), ("List", "item"))
        after = "" if noun == "String" else f" after validation, not {size}"
        if self.min is not None and size < self.min:
            plural = "" if self.min == 1 else "s"
            raise ValueError(f"{noun} should have at least {self.min} {unit}{plural}{after}")
        if self.max is not None and size > self.max:
            plural = "" if self.max == 1 else "s"
            raise ValueError(f"{noun} should have at most {self.max} {unit}{plural}{after}")
        return value

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> Any:
        import annotated_types as at

        marks: list[Any] = []
        if self.min is not None:
            marks.append(at.MinLen(self.min))
        if self.max is not None:
            marks.append(at.MaxLen(self.max))
        inner = [a for a in get_args(source) if a is not type(None)]
        if get_origin(source) in (Union, types.UnionType) and len(inner) == 1:
            # ``list[str] | None``: the bounds are the list's
            return handler(typing.Optional[typing.Annotated[(inner[0], *marks)]])  # noqa: UP045
        return handler(typing.Annotated[(source, *marks)])


class Tagged:
    """A union of records told apart by the value of ``key`` (``type: github``), so that a
    person's mistake is reported against the one record that tag names."""

    __slots__ = ("key",)

    def __init__(self, key: str) -> None:
        self.key = key

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> Any:
        from pydantic import Field

        return handler(typing.Annotated[source, Field(discriminator=self.key)])
