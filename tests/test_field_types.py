"""``record.hints`` resolves field types as ``typing.get_type_hints`` does, at less cost: held
to typing over every dataclass of the package, and on the cases its shortcuts must not bend."""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
import sys
import typing
from typing import Annotated, Any, Literal

import pytest

import backendmgr
from backendmgr._field_types import _evaluated, field_types
from backendmgr.record import Limit


def _setting(value: Any) -> Any:
    """A marker's setting; a function made anew by each evaluation by its name."""
    return getattr(value, "__qualname__", value) if callable(value) else value


def _shape(tp: Any) -> Any:
    """``tp`` compared by structure: a marker made anew by each evaluation (``Limit(gt=0)``)
    by its class and settings, not its identity."""
    if typing.get_origin(tp) is Annotated:
        marks = tuple(
            (type(m).__name__, tuple(_setting(getattr(m, k, None)) for k in m.__slots__))
            if hasattr(m, "__slots__")
            else m
            for m in tp.__metadata__
        )
        return ("Annotated", _shape(tp.__origin__), marks)
    args = typing.get_args(tp)
    if args:
        return (repr(typing.get_origin(tp)), tuple(_shape(a) for a in args))
    return tp


def _dataclasses() -> list[type]:
    for info in pkgutil.walk_packages(backendmgr.__path__, "backendmgr."):
        importlib.import_module(info.name)
    found = {
        obj
        for name, module in list(sys.modules.items())
        if name.startswith("backendmgr")
        for obj in vars(module).values()
        if isinstance(obj, type)
        and dataclasses.is_dataclass(obj)
        and obj.__module__.startswith("backendmgr")
    }
    return sorted(found, key=lambda c: f"{c.__module__}.{c.__qualname__}")


def test_every_dataclass_gets_the_types_typing_gives() -> None:
    compared = 0
    for cls in _dataclasses():
        try:
            every = typing.get_type_hints(cls, include_extras=True)
        except (NameError, TypeError):  # names only a type checker imports: never loaded
            continue
        theirs = {f.name: every[f.name] for f in dataclasses.fields(cls)}
        ours = _evaluated(cls)
        assert ours is not None, cls
        assert list(ours) == list(theirs), cls
        assert {k: _shape(v) for k, v in ours.items()} == {
            k: _shape(v) for k, v in theirs.items()
        }, cls
        compared += 1
    assert compared > 100  # the records, settings, requests and results all


Shadow = int  # a module name wins over a class attribute of the same name, as in typing


@dataclasses.dataclass
class _Base:
    size: Annotated[int, Limit(ge=0)]
    note: str | None = None


@dataclasses.dataclass
class _Child(_Base):
    Shadow: typing.ClassVar[type] = str
    kind: Literal["a", "b"] = "a"
    count: Shadow = 0
    nothing: None = None
    later: list[_Later] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class _Later:
    x: int = 0


@dataclasses.dataclass
class _Forward:
    items: list["_Later"]  # noqa: UP037 - a forward reference inside the annotation's text


def test_bases_names_none_and_literals_resolve_as_typing_does() -> None:
    ours = field_types(_Child)
    assert list(ours) == ["size", "note", "kind", "count", "nothing", "later"]
    assert ours["count"] is int and ours["nothing"] is type(None)
    assert ours["kind"] == Literal["a", "b"] and ours["later"] == list[_Later]
    assert _shape(ours["size"]) == _shape(typing.get_type_hints(_Base, include_extras=True)["size"])


def test_a_forward_reference_left_in_a_type_is_typings_to_resolve() -> None:
    assert _evaluated(_Forward) is None
    assert field_types(_Forward) == {"items": list[_Later]}


def test_an_unknown_name_fails_as_typing_does() -> None:
    @dataclasses.dataclass
    class Broken:
        x: NoSuchName  # type: ignore[name-defined]  # noqa: F821

    with pytest.raises(NameError):
        field_types(Broken)
