"""The field types of a dataclass as ``typing.get_type_hints`` resolves them, made cheaper.

Every record's first check or load asks its field types (:func:`backendmgr.record.hints`);
typing builds a ``ForwardRef``, compiles it and walks the result for every annotation of the
class and its bases, which is a tenth of a read's start-up (issue 30). Here an annotation's
text is compiled once per process and a bare name is looked up; a type that still holds a
forward reference is left to typing.
"""

from __future__ import annotations

import dataclasses
import inspect
import sys
import types
import typing
from typing import Any, Literal, get_args, get_origin

__all__ = ["field_types"]

_CODE: dict[str, types.CodeType] = {}
"""Each annotation's text, compiled once: most records share ``str``, ``int | None``…"""


def field_types(cls: type) -> dict[str, Any]:
    """The types of the fields of dataclass ``cls``, ``Annotated`` markers kept, as
    ``typing.get_type_hints(cls, include_extras=True)`` gives them."""
    found = _evaluated(cls)
    if found is None:  # a forward reference left in a type: typing's own walk resolves it
        every = typing.get_type_hints(cls, include_extras=True)
        found = {f.name: every[f.name] for f in dataclasses.fields(cls)}
    return found


def _evaluated(cls: type) -> dict[str, Any] | None:
    """The field types of ``cls``, each class's annotations evaluated as typing does (the
    names of its module first, then its own, then the built-ins) but without the
    ``ForwardRef``, compile and walk it makes per annotation of the class and its bases (its
    class variables too); ``None`` when a type still holds a forward reference (``list["X"]``),
    for typing to resolve."""
    order = [f.name for f in dataclasses.fields(cls)]
    fields = set(order)
    found: dict[str, Any] = {}
    for base in reversed(cls.__mro__):
        own = inspect.get_annotations(base)  # its own, as written
        if not own:
            continue
        module = getattr(sys.modules.get(base.__module__), "__dict__", {})
        scope: dict[str, Any] | None = None
        for name, text in own.items():
            if name not in fields:
                continue
            if not isinstance(text, str):
                value = text
            elif text in module:  # a bare name: looked up as eval would
                value = module[text]
            elif text.isidentifier() and text in base.__dict__:
                value = base.__dict__[text]
            else:
                code = _CODE.get(text)
                if code is None:
                    code = _CODE[text] = compile(text, "<annotation>", "eval")
                if scope is None:
                    scope = dict(base.__dict__)  # as typing: the class's names after the module's
                value = eval(code, scope, module)  # the class's own annotation
            if value is None:
                value = type(None)
            if not _settled(value):
                return None
            found[name] = value
    return {name: found[name] for name in order}


def _settled(tp: Any) -> bool:
    """Whether ``tp`` holds no forward reference typing would still evaluate."""
    if type(tp) is type:  # a class (``str``, a record): most fields, and the leaves of the rest
        return True
    if isinstance(tp, str | typing.ForwardRef):
        return False
    origin = get_origin(tp)
    if origin is typing.Annotated:
        return _settled(tp.__origin__)
    if origin is Literal:
        return True
    if isinstance(tp, types.GenericAlias) and any(isinstance(a, str) for a in tp.__args__):
        return False
    return all(_settled(a) for a in get_args(tp))
