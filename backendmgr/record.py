"""Typed records: dataclasses, immutable by type (``immutable.frozen``), loaded without pydantic.

Importing pydantic and building its models costs more than a whole read (issue 30), so the
types every command loads (settings, registry rows, receipts, manifests, caches) are plain
dataclasses. What a person wrote (the config's YAML, a manifest, an API body) is validated by
pydantic, which understands these dataclasses and the markers below, so its error messages
stay the ones users know. What backendmgr wrote itself (a receipt, a cache, the config's parsed
snapshot) is read back with :func:`load`: a strict walk over the field types that refuses any
value of the wrong type, any unknown or missing key, and runs the same field checks.

A record checks itself when made (``__post_init__``), as a pydantic model does: its fields'
:class:`After` checks and bounds, then its :meth:`Record.rule`; :func:`dataclasses.replace`
too. Markers go in ``Annotated[...]``: :class:`Before` (what a person may write, made the
field's form: ``device: 1`` → ``"1"``), :class:`After` (a check that may also normalise),
:class:`Limit` (``gt``/``ge``/``le``: a finite number in range; ``pattern``), :class:`Length`
(``min``/``max`` characters or items), in pydantic's words, and :class:`Tagged` (a union of
records told apart by one key).
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Callable, Mapping
from pathlib import PurePath
from typing import Any, ClassVar, Literal, TypeVar, Union, get_args, get_origin

from . import _yaml
from ._field_types import field_types
from .immutable import frozen

__all__ = [
    "After",
    "Before",
    "Invalid",
    "Length",
    "Limit",
    "Record",
    "Tagged",
    "hints",
    "instant",
    "load",
    "plain",
    "validate",
]

T = TypeVar("T")


class Invalid(ValueError):
    """What :func:`load` refused, as ``where: why`` (one line)."""


class Before:
    """Turn what a person may write into the field's form before its type is checked (pydantic
    ``mode="before"``). ``fn`` raises ValueError with a one-line reason."""

    __slots__ = ("fn",)

    def __init__(self, fn: Callable[[Any], Any]) -> None:
        self.fn = fn

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> Any:
        from pydantic_core import core_schema

        return core_schema.no_info_before_validator_function(self.fn, handler(source))


class After:
    """A check of the typed value (pydantic ``mode="after"``); ``fn`` returns the value (it
    may normalise it) or raises ValueError with a one-line reason."""

    __slots__ = ("fn",)

    def __init__(self, fn: Callable[[Any], Any]) -> None:
        self.fn = fn

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> Any:
        from pydantic_core import core_schema

        return core_schema.no_info_after_validator_function(self.fn, handler(source))


def _bounded(source: Any, marks: list[Any], handler: Any) -> Any:
    """pydantic's schema of ``source`` with ``marks`` on it; on ``X | None`` they bound ``X``."""
    inner = [a for a in get_args(source) if a is not type(None)]
    if get_origin(source) in (Union, types.UnionType) and len(inner) == 1:
        return handler(typing.Optional[typing.Annotated[(inner[0], *marks)]])  # noqa: UP045
    return handler(typing.Annotated[(source, *marks)])


class Limit:
    """Numeric bounds in pydantic's words (``Input should be greater than 0``); None passes."""

    __slots__ = ("ge", "gt", "le", "numeric", "pattern")

    def __init__(
        self,
        *,
        gt: float | None = None,
        ge: float | None = None,
        le: float | None = None,
        pattern: str | None = None,
    ) -> None:
        self.gt, self.ge, self.le, self.pattern = gt, ge, le, pattern
        self.numeric = gt is not None or ge is not None or le is not None

    def problem(self, value: Any) -> str | None:
        if value is None:
            return None
        if isinstance(value, bool):  # an int subclass: ``ctx: true`` is no context of 1
            return "Input should be a number, not true or false" if self.numeric else None
        if isinstance(value, int | float):
            if isinstance(value, float) and not math.isfinite(value):  # a bound is a range
                return "Input should be a finite number"
            if self.gt is not None and not value > self.gt:
                return f"Input should be greater than {self.gt}"
            if self.ge is not None and not value >= self.ge:
                return f"Input should be greater than or equal to {self.ge}"
            if self.le is not None and not value <= self.le:
                return f"Input should be less than or equal to {self.le}"
        if isinstance(value, str) and self.pattern is not None:
            import re

            if re.search(self.pattern, value) is None:
                return f"String should match pattern '{self.pattern}'"
        return None

    def _no_bool(self, value: Any) -> Any:
        if isinstance(value, bool) and (problem := self.problem(value)):
            raise ValueError(problem)
        return value

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> Any:
        import annotated_types as at

        bounds = ((at.Gt, self.gt), (at.Ge, self.ge), (at.Le, self.le))
        marks: list[Any] = [mark(v) for mark, v in bounds if v is not None]
        if self.numeric:  # lax pydantic makes ``true`` a 1: refused first, as ``problem`` does
            marks.insert(0, Before(self._no_bool))
        if self.pattern is not None:
            from pydantic import Field

            marks.append(Field(pattern=self.pattern))
        return _bounded(source, marks, handler)


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

        bounds = ((at.MinLen, self.min), (at.MaxLen, self.max))
        marks: list[Any] = [mark(v) for mark, v in bounds if v is not None]
        return _bounded(source, marks, handler)


class Tagged:
    """Records told apart by ``key`` (``type: github``): a mistake is said against that one."""

    __slots__ = ("key",)

    def __init__(self, key: str) -> None:
        self.key = key

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> Any:
        from pydantic import Field

        return handler(typing.Annotated[source, Field(discriminator=self.key)])


_HINTS: dict[type, dict[str, Any]] = {}


def hints(cls: type) -> dict[str, Any]:
    """The resolved field types of dataclass ``cls``, ``Annotated`` markers kept (cached)."""
    found = _HINTS.get(cls)
    if found is None:
        found = _HINTS[cls] = field_types(cls)
    return found


_CHECKS: dict[type, tuple[tuple[str, tuple[Any, ...]], ...]] = {}


def _checks(cls: type) -> tuple[tuple[str, tuple[Any, ...]], ...]:
    """Each field of ``cls`` with its After checks and limits, those that have any."""
    found = _CHECKS.get(cls)
    if found is None:
        out = []
        for name, hint in hints(cls).items():
            marks = tuple(
                m for m in getattr(hint, "__metadata__", ()) if isinstance(m, After | Limit)
            )
            if marks:
                out.append((name, marks))
        found = _CHECKS[cls] = tuple(out)
    return found


@frozen
class Record:
    """The base of every record: made (directly, by :func:`load`, by pydantic, by
    :func:`dataclasses.replace`), it runs its fields' checks, then :meth:`rule`.

    It has no fields, so it makes no ``__eq__``, ``__hash__`` or ``__repr__``: a record that
    leaves them off (one no code compares or prints) must not inherit ones over no fields,
    which would make any two of its records equal."""

    # pydantic's validation of a record refuses keys it does not name, as :func:`load` does
    __pydantic_config__: ClassVar[dict[str, Any]] = {"extra": "forbid"}

    def __post_init__(self) -> None:
        # all None (``ModelOverride()``) passes every check: no field type evaluated for it
        fields = () if type(self) in _CHECKS else dataclasses.fields(self)
        empty = bool(fields) and all(getattr(self, f.name) is None for f in fields)
        for name, marks in () if empty else _checks(type(self)):
            value = getattr(self, name)
            for mark in marks:
                if isinstance(mark, Limit):
                    problem = mark.problem(value)
                    if problem is not None:
                        raise ValueError(f"{name}: {problem}")
                elif value is not None:
                    try:
                        new = mark.fn(value)
                    except ValueError as exc:
                        raise ValueError(f"{name}: {exc}") from None
                    if new is not value:
                        object.__setattr__(self, name, new)
                        value = new
        problem = self.rule()
        if problem is not None:
            raise ValueError(problem)

    def rule(self) -> str | None:
        """A rule over several fields, said as the user should read it; none by default."""
        return None


def load(cls: type[T], data: Any, where: str = "") -> T:
    """``data`` (plain JSON data backendmgr wrote) as a ``cls``, checked strictly: every value
    of its declared type (an int is a float; nothing else is converted), no unknown or missing
    key, every field check and rule. Raises :class:`Invalid` naming the first problem."""
    try:
        return typing.cast(T, _load(cls, data, where))
    except Invalid:
        raise
    except (ValueError, TypeError, ArithmeticError, RecursionError) as exc:  # a check refused it
        raise Invalid(f"{where or 'value'}: {exc}") from None


def instant(value: str) -> str:
    """A field check: ISO 8601 text of a time that can be said in UTC, as backendmgr writes
    its times (a receipt's install, a verify's run). The calendar's first and last days in
    another zone cannot (OverflowError): every reader that shows "3 days ago" would fail."""
    from datetime import UTC, datetime

    when = datetime.fromisoformat(value)  # ValueError: not a time
    try:
        when.astimezone(UTC)
    except OverflowError:
        raise ValueError(f"not a time backendmgr writes: {value!r}") from None
    return value


_INT_BOUND = 1 << 64
"""No integer backendmgr keeps (a size, a time in nanoseconds, a context) reaches 2**64; one
of thousands of digits would fail later, formatted as a size (OverflowError)."""


def _name(tp: Any) -> str:
    return getattr(tp, "__name__", None) or str(tp)


def _load(tp: Any, data: Any, where: str) -> Any:
    origin = get_origin(tp)
    if tp is Any or tp is object:
        _shallow(data, where)
        return data
    if origin is typing.Annotated:
        inner, *marks = get_args(tp)
        for mark in marks:
            if isinstance(mark, Before):
                data = mark.fn(data)
        value = _load(inner, data, where)
        if not (isinstance(inner, type) and issubclass(inner, Record)):
            for mark in marks:  # a record runs its own in __post_init__
                if isinstance(mark, After) and value is not None:
                    try:
                        value = mark.fn(value)
                    except ValueError as exc:
                        raise Invalid(f"{where}: {exc}") from None
                elif isinstance(mark, Limit) and (problem := mark.problem(value)) is not None:
                    raise Invalid(f"{where}: {problem}")
        return value
    if origin in (Union, types.UnionType):
        args = get_args(tp)
        if data is None and type(None) in args:
            return None
        last: Invalid | None = None
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _load(arg, data, where)
            except Invalid as exc:
                last = exc
        raise last or Invalid(f"{where}: unexpected {type(data).__name__}")
    if origin is Literal:
        if data in get_args(tp) and type(data) in {type(a) for a in get_args(tp)}:
            return data
        raise Invalid(f"{where}: expected one of {', '.join(map(repr, get_args(tp)))}")
    if tp is type(None):
        if data is None:
            return None
        raise Invalid(f"{where}: expected null")
    if tp is bool:
        if isinstance(data, bool):
            return data
        raise Invalid(f"{where}: expected true or false")
    if tp is int:
        if isinstance(data, int) and not isinstance(data, bool):
            if not -_INT_BOUND < data < _INT_BOUND:  # no count, size or time of ours is
                raise Invalid(f"{where}: integer too large")
            return data
        raise Invalid(f"{where}: expected an integer")
    if tp is float:
        if isinstance(data, int | float) and not isinstance(data, bool):
            try:
                number = float(data)
            except OverflowError:  # an integer of hundreds of digits
                raise Invalid(f"{where}: number too large") from None
            if number != number:  # NaN: no measurement or setting of ours is one
                raise Invalid(f"{where}: not a number (NaN)")
            return number
        raise Invalid(f"{where}: expected a number")
    if tp is str:
        if isinstance(data, str):
            return _text(data, where)
        raise Invalid(f"{where}: expected a string")
    if isinstance(tp, type) and issubclass(tp, PurePath):
        if isinstance(data, str):
            return tp(data)
        raise Invalid(f"{where}: expected a path")
    if origin in (list, tuple, frozenset, set):
        if not isinstance(data, list):
            raise Invalid(f"{where}: expected a list")
        args = get_args(tp)
        if origin is tuple and not (len(args) == 2 and args[1] is Ellipsis):
            if len(args) != len(data):
                raise Invalid(f"{where}: expected {len(args)} items")
            return tuple(
                _load(a, d, f"{where}[{i}]")
                for i, (a, d) in enumerate(zip(args, data, strict=True))
            )
        item = args[0] if args else Any
        return origin(_load(item, d, f"{where}[{i}]") for i, d in enumerate(data))
    if origin is dict or origin is Mapping:
        if not isinstance(data, dict):
            raise Invalid(f"{where}: expected a mapping")
        key_tp, value_tp = get_args(tp) or (Any, Any)
        out = {}
        for key, value in data.items():
            out[_load(key_tp, key, where)] = _load(value_tp, value, f"{where}.{key}".lstrip("."))
        return out
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return _record(tp, data, where)
    raise Invalid(f"{where}: cannot read a {_name(tp)}")


def _text(data: str, where: str) -> str:
    """``data``, unless JSON's ``\\ud800`` made it text no file or terminal can hold (a lone
    surrogate): backendmgr never writes one, and printing it would fail."""
    if not data.isascii():
        try:
            data.encode("utf-8")
        except UnicodeEncodeError:
            raise Invalid(f"{where}: not text (a lone surrogate)") from None
    return data


MAX_DEPTH = _yaml.MAX_DEPTH
"""How deep a free-form value (a passthrough, a header) may nest: as deep as a config's YAML
may, so whatever walks it later (a rule, the emitter, ``plain``) never runs out of stack."""


def _shallow(data: Any, where: str) -> None:
    """Refuse free-form ``data`` nested deeper than :data:`MAX_DEPTH`, holding text that is
    not text or a NaN, which no writer of ours keeps (iterative: the check itself cannot run
    out of stack). Scalars are looked at in their container's loop, only containers (and a
    NaN, to refuse it) go on the stack: a header cache of a few thousand values is read per
    command."""
    stack: list[tuple[Any, int]] = [(data, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            _text(item, where)
            continue
        if isinstance(item, float):
            if item != item:
                raise Invalid(f"{where}: not a number (NaN)")
            continue
        if not isinstance(item, dict | list):
            continue
        if depth >= MAX_DEPTH:
            raise Invalid(f"{where}: nested deeper than {MAX_DEPTH} levels")
        if isinstance(item, dict):
            for key in item:
                if isinstance(key, str) and not key.isascii():
                    _text(key, where)
            item = item.values()
        for value in item:
            if isinstance(value, str):
                if not value.isascii():
                    _text(value, where)
            elif isinstance(value, dict | list) or (isinstance(value, float) and value != value):
                stack.append((value, depth + 1))


def _record(cls: type, data: Any, where: str) -> Any:
    if not isinstance(data, dict):
        raise Invalid(f"{where or _name(cls)}: expected a mapping")
    types_ = hints(cls)
    extra = [k for k in data if k not in types_]
    if extra:
        raise Invalid(f"{where}{'.' if where else ''}{extra[0]}: not a field of {_name(cls)}")
    kwargs = {}
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        if f.name in data:
            at = f"{where}.{f.name}" if where else f.name
            kwargs[f.name] = _load(types_[f.name], data[f.name], at)
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise Invalid(f"{where}{'.' if where else ''}{f.name}: missing")
    try:
        return cls(**kwargs)
    except (ValueError, TypeError) as exc:
        raise Invalid(f"{where or _name(cls)}: {exc}") from None


_ADAPTERS: dict[Any, Any] = {}


def validate(cls: type[T], data: Any) -> T:
    """``data`` (what a person wrote: parsed YAML, a JSON body) as a ``cls``, by pydantic:
    lax where people are (``"5"`` for 5), with pydantic's error messages. Raises pydantic's
    ``ValidationError`` (a ValueError)."""
    adapter = _ADAPTERS.get(cls)
    if adapter is None:
        from pydantic import TypeAdapter

        adapter = _ADAPTERS[cls] = TypeAdapter(cls)
    return typing.cast(T, adapter.validate_python(data))


def plain(value: Any, *, drop_none: bool = False) -> Any:
    """``value`` as JSON data: records as mappings of their fields (``drop_none``: without
    the fields that are None, at every depth), tuples and sets as lists, paths as text."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out = {}
        for f in dataclasses.fields(value):
            item = getattr(value, f.name)
            if item is None and drop_none:
                continue
            out[f.name] = plain(item, drop_none=drop_none)
        return out
    if isinstance(value, dict):
        return {k: plain(v, drop_none=drop_none) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [plain(v, drop_none=drop_none) for v in value]
    if isinstance(value, PurePath):
        return str(value)
    return value
