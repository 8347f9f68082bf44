"""YAML that a user wrote (the config, manifests): bounded before anything builds or walks it.

The composer and every walk over the loaded tree recurse once per level, and an alias is one
node in the file but a whole subtree to whatever converts the document, so ten lines of
``&a``/``*a`` expand to billions of values. :func:`check_yaml` reads the parser's event stream,
which is flat, and refuses a document nested deeper than :data:`MAX_DEPTH` or whose aliases
expand to more than :data:`MAX_NODES` values or :data:`MAX_CHARS` characters of text, before
anything else sees it.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any

from .errors import ConfigError

__all__ = [
    "MAX_BYTES",
    "MAX_CHARS",
    "MAX_DEPTH",
    "MAX_INT_DIGITS",
    "MAX_NODES",
    "check_yaml",
    "load_yaml",
    "parser_name",
    "read_limited",
    "yaml_problem",
]

MAX_BYTES = 8 << 20
"""The largest user YAML file read; a config or manifest is a few kilobytes."""
MAX_DEPTH = 64
"""Nesting levels allowed; backendmgr's own files need five."""
MAX_NODES = 200_000
"""Values a document may hold once every alias is expanded."""
MAX_INT_DIGITS = 4300
"""Digits of the longest decimal integer a document may hold: Python's default
``int_max_str_digits``, past which the loader's ``int()`` fails (no setting needs 20)."""
MAX_CHARS = 2 * MAX_BYTES
"""Characters a document's values may hold once every alias is expanded: a few aliases of
one long value are few values but gigabytes to every walk, copy and write of the tree."""


@functools.cache
def parser_name() -> str:
    """The YAML library as installed, in the stamp of a kept parse (another version may read
    the same bytes otherwise): where its package is and the size and time of its
    ``__init__.py``, which holds its version, so that a read served from a kept parse imports
    neither the library nor ``importlib.metadata`` (~35 ms); likewise its C parser
    (``ruamel.yaml.clib``), which the safe loads use where it is installed and which reads a
    few documents apart from the pure one (a ``%YAML 1.1`` directive, a tab after ``: ``)."""
    library = _file_stamp("ruamel.yaml")
    if library is None:  # not a plain installed package (frozen): ask it
        from ruamel.yaml import __version__

        library = f"ruamel.yaml {__version__}"
    c_parser = _file_stamp("_ruamel_yaml")
    return f"{library} {c_parser}" if c_parser else library


def _file_stamp(module: str) -> str | None:
    """Where ``module`` would be imported from, and that file's size and time."""
    import importlib.util

    spec = importlib.util.find_spec(module)
    origin = spec.origin if spec is not None else None
    try:
        st = os.stat(origin) if origin else None
    except OSError:
        return None
    return f"{module} {origin} {st.st_size} {st.st_mtime_ns}" if st else None


def read_limited(path: Path, limit: int = MAX_BYTES) -> bytes:
    """The file's bytes, refused when over ``limit`` (without reading the rest). Anything but
    a regular file (a FIFO, which would hang the open; a link to ``/dev/zero``) is refused
    without blocking, as one :class:`ConfigError`; the system's own refusals (absent, denied)
    stay the caller's :class:`OSError` to word."""
    from ._fs import read_regular

    try:
        data = read_regular(path, limit)
    except OSError as exc:
        if exc.errno is not None:
            raise
        raise ConfigError(f"{path}: not a regular file; this is not a backendmgr file") from None
    if len(data) > limit:
        raise ConfigError(f"{path}: larger than {limit >> 20} MiB; this is not a backendmgr file")
    return data


def check_yaml(text: str, source: str, *, pure: bool = False) -> None:
    """Refuse ``text`` when it nests too deep or its aliases expand too far.

    The events are those of the parser that builds the tree afterwards, so the bound holds
    for what is built: ruamel's C parser (libyaml, through ``ruamel.yaml.clib``) by default,
    as ``YAML(typ="safe")`` loads with it where it is installed; ``pure``: ruamel's own
    parser, for the round-trip loader, which always uses it. Both parsers hold their nesting
    on a heap stack, so the event stream of any document is safe to read; libyaml's C
    composer, unlike ruamel's, recurses on the C stack and crashes the process near
    100 000 levels, so nothing may load user YAML with it before this check.

    Syntax errors propagate as ruamel's own ``YAMLError`` so that callers report them as
    they already do; ``source`` (a file name) starts the one-line :class:`ConfigError`.
    """
    from ruamel.yaml import YAML
    from ruamel.yaml.events import (
        AliasEvent,
        CollectionEndEvent,
        CollectionStartEvent,
        NodeEvent,
    )

    sizes: dict[Any, tuple[int, int]] = {}  # anchor -> values and characters it stands for
    stack: list[list[Any]] = []  # per open collection: [anchor, values so far, characters]
    total = [0, 0]
    for event in YAML(typ="safe", pure=pure).parse(text):
        if isinstance(event, CollectionStartEvent):
            if len(stack) >= MAX_DEPTH:
                raise ConfigError(
                    f"{source} line {event.start_mark.line + 1}: nested more than "
                    f"{MAX_DEPTH} levels deep; flatten the YAML"
                )
            stack.append([event.anchor, 1, 0])
            continue
        if isinstance(event, CollectionEndEvent):
            anchor, size, chars = stack.pop()
        elif isinstance(event, AliasEvent):
            if any(frame[0] == event.anchor for frame in stack):
                raise ConfigError(
                    f"{source} line {event.start_mark.line + 1}: alias *{event.anchor} is "
                    "inside the value it names; a value cannot contain itself"
                )
            anchor = None
            size, chars = sizes.get(event.anchor, (1, 0))
        elif isinstance(event, NodeEvent):  # a scalar
            value = getattr(event, "value", "") or ""
            anchor, size, chars = event.anchor, 1, len(value)
            if chars > MAX_INT_DIGITS and _huge_int(value, getattr(event, "style", None)):
                raise ConfigError(
                    f"{source} line {event.start_mark.line + 1}: a number of more than "
                    f"{MAX_INT_DIGITS} digits; no value backendmgr reads is one"
                )
        else:
            continue
        if anchor is not None:
            sizes[anchor] = (size, chars)
        into = stack[-1] if stack else total
        into[-2] += size
        into[-1] += chars
        if into[-2] > MAX_NODES or into[-1] > MAX_CHARS:
            what = (
                f"{MAX_NODES} values" if into[-2] > MAX_NODES else f"{MAX_CHARS >> 20} MiB of text"
            )
            where = f"{source} line {event.start_mark.line + 1}"
            if sizes:  # an anchor was set: its aliases may be what grew it
                raise ConfigError(
                    f"{where}: aliases expand to more than {what}; write the values out instead"
                )
            raise ConfigError(f"{where}: more than {what}; this is not a backendmgr file")


def _huge_int(value: str, style: str | None) -> bool:
    """Whether a long plain scalar reads as a decimal integer (YAML 1.2, ``_`` allowed):
    Python converts none of more than :data:`MAX_INT_DIGITS` digits (a bare ValueError from
    inside the loader); the check runs only on scalars that long, so it costs nothing."""
    digits = value.lstrip("+-").replace("_", "")
    return style is None and digits.isascii() and digits.isdigit()


def yaml_problem(source: str, exc: Exception) -> str:
    """A YAML syntax error as one line naming the file, line and column (issue 33), in the
    words every YAML file backendmgr reads uses: ``config.yaml line 3 column 7: <problem>``."""
    from ruamel.yaml.error import MarkedYAMLError

    if isinstance(exc, MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        where = f" line {mark.line + 1} column {mark.column + 1}" if mark is not None else ""
        problem = " ".join((exc.problem or exc.context or "invalid YAML").split())
        return f"{source}{where}: {problem}; fix the YAML and try again"
    text = str(exc).strip()
    return f"{source}: {text.splitlines()[0] if text else type(exc).__name__}"


def load_yaml(text: str, source: str) -> Any:
    """Plain Python data from user YAML, checked by :func:`check_yaml` first.

    Every failure, a recursion limit or a value no conversion takes included, is one
    :class:`ConfigError` naming ``source``.
    """
    from ruamel.yaml.error import YAMLError

    from ._ruamel import safe_yaml

    try:
        check_yaml(text, source)
        return safe_yaml().load(text)
    except YAMLError as exc:
        raise ConfigError(yaml_problem(source, exc)) from exc
    except RecursionError as exc:
        raise ConfigError(f"{source}: nested too deep to read; flatten the YAML") from exc
    except ValueError as exc:  # a scalar the resolver cannot convert (a number too long)
        raise ConfigError(yaml_problem(source, exc)) from exc
