"""A command's options and operands, generated from its request class (:mod:`backendmgr.requests`).

Each field of the request becomes one argument: its help, spelling, default and limits come
from the field's declaration, never restated here. A boolean is a ``store_true`` flag (or, when
its default is true, the ``--no-…`` flag its :class:`~backendmgr.requests.Arg` names); a number
with :class:`~backendmgr.limits.Bounds` is checked by the bounds' argparse type; a list or a
mapping is an operand of several words (a mapping's as ``KEY=VALUE``), a list option is
given once per value (``--build A --build B``), a field with ``choices`` takes only those;
every other limit is checked at parse time in the request's own words. Once the command is
parsed, the request is made (its cross-field rule included) and left in ``args.request``: a
value it refuses is the command's usage error (exit 2), before anything is opened."""

from __future__ import annotations

import argparse
import dataclasses
import math
import typing
from collections.abc import Callable, Collection, Mapping
from typing import Any, TypeVar

from ..errors import InvalidInput
from ..limits import Bounds
from ..requests import Arg, Request, args_of
from .parser import stand_in, usage_check

__all__ = ["add_fields", "add_request", "as_typed", "kind_of", "made", "request_in"]

R = TypeVar("R", bound=Request)


def kind_of(cls: type[Request], name: str) -> type:
    """The plain type of field ``name`` (``str`` for ``str | None``, ``list`` for a list)."""
    hint = cls.__dataclass_fields__[name].type
    base = typing.get_args(hint)[0] if typing.get_origin(hint) is typing.Annotated else hint
    options = [a for a in typing.get_args(base) if a is not type(None)] or [base]
    if typing.get_origin(base) in (list, dict):
        options = [base]
    found = typing.get_origin(options[0]) or options[0]
    assert isinstance(found, type), hint
    return found


def default_of(cls: type[Request], name: str) -> Any:
    """Field ``name``'s default (``dataclasses.MISSING`` when it has none)."""
    f = cls.__dataclass_fields__[name]
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return f.default


def _checked(name: str, arg: Arg) -> Callable[[str], str]:
    """An argparse ``type=`` for a text: the words the request would say."""

    def parse(text: str) -> str:
        problem = arg.problem(text)
        if problem is not None:
            raise argparse.ArgumentTypeError(problem)
        return text

    parse.__name__ = name  # argparse names the type in some of its messages
    return parse


def _then(first: Callable[[str], str], then: Callable[[str], Any]) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        return then(first(text))

    parse.__name__ = getattr(then, "__name__", "value")
    return parse


def _pair(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f'"{text}" is not KEY=VALUE')
    return key.strip(), value


def add_request(
    parser: argparse.ArgumentParser,
    cls: type[Request],
    *,
    given: Mapping[str, Any] | None = None,
    types: Mapping[str, Callable[[str], Any]] | None = None,
) -> None:
    """Add to ``parser`` one argument per field of ``cls`` (but those ``given`` by the command
    itself, e.g. ``add`` for ``models add-dir``), and make the request once it is parsed.

    ``types`` replaces a field's argparse type where the CLI says more than the request
    (``--kind``'s nearest known kinds)."""
    given = dict(given or {})
    add_fields(parser, cls, skip=given, types=types)
    parser.set_defaults(request_type=cls, **given)  # request_type: for the tests' walk
    usage_check(parser, _maker(cls))


def add_fields(
    parser: argparse.ArgumentParser,
    cls: type[Request],
    *,
    skip: Collection[str] = (),
    types: Mapping[str, Callable[[str], Any]] | None = None,
    unset: bool = False,
) -> None:
    """The arguments of ``cls``'s fields but ``skip``, without making the request: for one a
    command makes besides its own (``verify --repair``, ``activate --canary``: see
    :func:`made`). ``unset``: an option not given stays None (its help names the request's
    default, which :func:`made` then applies), so the command can tell it was not given."""
    if stand_in(parser):
        return
    types = types or {}
    for name, arg in args_of(cls):
        if name in skip or not arg.cli:
            continue
        kind = kind_of(cls, name)
        default = default_of(cls, name)
        # argparse %-formats a help: the default is written in here, every other % kept
        options: dict[str, Any] = {"help": arg.text(default).replace("%", "%%")}
        if unset and kind is not bool and default is not dataclasses.MISSING:
            default = None  # the help still names the request's default
        if arg.metavar is not None:
            options["metavar"] = arg.metavar
        if kind is bool:
            flag = arg.option(name)
            action = "store_false" if default is True else "store_true"
            parser.add_argument(flag, dest=name, action=action, help=options["help"])
            continue
        if kind in (list, dict):
            options["nargs"] = "+" if (arg.low or 0) >= 1 else "*"
            options["type"] = _pair if kind is dict else str
            if not arg.positional:  # an option given once per value: --build A --build B
                options["action"] = "append"
                del options["nargs"]
        elif arg.bounds is not None:
            options["type"] = arg.bounds.argument()
        elif kind in (int, float):  # a number the request's rule bounds (bisect's --threshold)
            options["type"] = Bounds(-math.inf, math.inf, whole=kind is int).argument()
        elif arg.choices is not None:  # argparse's check: the nearest choice, did-you-mean
            options["choices"] = arg.choices
        else:
            options["type"] = _checked(name, arg)
        if name in types:  # the field's limits first, then what the command's type says
            options["type"] = _then(_checked(name, arg), types[name])
        if arg.positional:
            if default is None:
                options["nargs"] = "?"
            parser.add_argument(name, **options)
            continue
        if default is dataclasses.MISSING:
            options["required"] = True
        else:
            options["default"] = default
        parser.add_argument(arg.option(name), dest=name, **options)


def made(args: argparse.Namespace, cls: type[R], **given: Any) -> R:
    """The ``cls`` request of the parsed ``args`` (its fields the :func:`add_fields` made, or
    ``given``); a value it refuses is a usage error (exit 2), naming the option as typed."""
    values = {n: getattr(args, n) for n, a in args_of(cls) if a.cli and n not in given}
    values = {name: v for name, v in values.items() if v is not None}  # None: its default
    try:
        return cls(**_plain(cls, values), **given)
    except InvalidInput as exc:
        raise type(exc)(as_typed(cls, str(exc))) from None


def as_typed(cls: type[Request], problem: str) -> str:
    """A request's ``field: why`` in the command line's words, as argparse says its own
    (``argument --build: …``, ``argument KEY=VALUE: …``); any other text as it is."""
    name, sep, why = problem.partition(": ")
    arg = dict(args_of(cls)).get(name) if sep else None
    if arg is None:
        return problem
    spelled = arg.metavar or name if arg.positional else arg.option(name)
    return f"argument {spelled}: {why}"


def _plain(cls: type[Request], values: dict[str, Any]) -> dict[str, Any]:
    for name, value in values.items():
        if isinstance(value, list) and kind_of(cls, name) is dict:
            values[name] = dict(value)
    return values


def _maker(cls: type[Request]) -> Callable[[argparse.Namespace], str | None]:
    def make(args: argparse.Namespace) -> str | None:
        values = _plain(cls, {n: getattr(args, n) for n, a in args_of(cls) if a.cli})
        try:
            args.request = cls(**values)
        except InvalidInput as exc:
            return as_typed(cls, str(exc))
        return None

    return make


def request_in(args: argparse.Namespace, cls: type[R]) -> R:
    """The request the parser made for this command (see :func:`add_request`)."""
    request = args.request
    assert isinstance(request, cls), f"the command's parser makes a {cls.__name__}"
    return request
