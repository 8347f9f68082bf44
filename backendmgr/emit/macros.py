"""llama-swap's macro language, as its loader reads it (internal/config/macros.go, load.go).

Pure. Text from users and from the disk must never become a macro by accident: in ``cmd`` a
``${`` is written so that shell-words gives it back but the macro pattern no longer matches
(:func:`shell_word`); in every other string no escape exists, so a user value that would be
read as a macro is refused (:func:`value_problem`) and a disk name that would be makes its
model skipped (:func:`load_problems` over the model's data). Users get macros through one
explicit form: ``${PORT}``, ``${MODEL_ID}``, ``${env.NAME}`` and the names their own
``llama_swap: {macros: …}`` defines.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Collection, Iterable, Iterator, Mapping
from typing import Any

from .expand import (
    DEFAULT_PROXY,
    ENV_MACRO,
    MACRO_PATTERN,
    ExpandError,
    check_macro,
    merge_macros,
    strip_comments,
    substitute,
)

__all__ = [
    "BUILTIN",
    "ENV_MACRO",
    "MACRO",
    "MERGE_KEY",
    "declared",
    "env_names",
    "load_problems",
    "macro_problem",
    "model_problem",
    "shell_line",
    "shell_word",
    "value_problem",
]

MACRO = MACRO_PATTERN
BUILTIN = frozenset({"PORT", "MODEL_ID"})
# yaml.v3 merges a "<<" key, quoted or not, once llama-swap re-encodes its parsed file
MERGE_KEY = "<<"
_SHOWN = 40


def _explicit(text: str, at: int, defined: Collection[str] | None) -> re.Match[str] | None:
    """The allowed macro starting at ``at``, if the ``${`` there starts one (``defined``
    None: any name)."""
    env = re.compile(ENV_MACRO).match(text, at)  # re's cache: compiled once
    if env is not None:
        return env
    named = MACRO.match(text, at)
    if named is not None and (
        defined is None or named.group(1) in BUILTIN or named.group(1) in defined
    ):
        return named
    return None


def _pieces(text: str, defined: Collection[str] | None) -> Iterator[tuple[str, bool]]:
    """``text`` cut into literal runs and allowed macros (True)."""
    start = at = 0
    while (at := text.find("${", at)) >= 0:
        found = _explicit(text, at, defined)
        if found is None:
            at += 2
            continue
        if start < at:
            yield text[start:at], False
        yield found.group(0), True
        start = at = found.end()
    if start < len(text):
        yield text[start:], False


def _literal(text: str) -> str:
    """One literal run for a POSIX shell: each ``${`` becomes ``$\\{`` outside the quotes, which
    shell-words reads back as ``${`` and llama-swap's macro pattern does not match."""
    if "${" not in text:  # most words of every entry's command line
        return shlex.quote(text) if text else ""
    parts = text.split("${")
    out = [shlex.quote(parts[0]) if parts[0] else ""]
    for part in parts[1:]:
        out.append("$\\{" + (shlex.quote(part) if part else ""))
    return "".join(out)


def shell_word(token: str, defined: Collection[str] | None = None) -> str:
    """``token`` quoted for llama-swap's ``cmd``: shell-words gives it back byte for byte.
    With ``defined`` (the user's own text), the explicit macros stay macros; without it
    (paths, names, ids: text from the disk), every ``${`` is a literal."""
    if defined is None:
        return _literal(token) if token else "''"
    pieces = list(_pieces(token, defined))
    if not pieces:
        return "''"
    return "".join(p if macro else _literal(p) for p, macro in pieces)


def shell_line(text: str, defined: Collection[str]) -> str:
    """The user's ``extra_args`` as one ``cmd`` line: split as shell words, each word quoted
    again, so a ``${foo}`` that is no explicit macro, a ``#`` or a trailing ``\\`` arrives as
    typed (llama-swap drops comment lines and joins ``\\`` lines before it splits)."""
    return " ".join(shell_word(t, defined) for t in shlex.split(text))


def env_names(text: str) -> list[str]:
    """The ``NAME`` of every ``${env.NAME}`` in ``text`` (the pattern is compiled only for a
    text that could hold one: most values an edit sets hold none)."""
    if "${env." not in text:
        return []
    return [m.group(1) for m in re.finditer(ENV_MACRO, text)]


def value_problem(text: str, what: str, defined: Collection[str] | None = ()) -> str | None:
    """Why ``text`` cannot be a string llama-swap reads without a macro escape (``env``
    values, passthrough strings): a ``${`` that starts no explicit macro. None if it can."""
    at = 0
    while (at := text.find("${", at)) >= 0:
        found = _explicit(text, at, defined)
        if found is None:
            bad = MACRO.match(text, at)
            shown = bad.group(0) if bad else text[at : at + _SHOWN].split("}", 1)[0] + "…"
            return (
                f'{what} holds "{shown}", which llama-swap would read as a macro; a literal '
                "${ cannot be written there. Use ${PORT}, ${MODEL_ID}, ${env.NAME} or a name "
                "your llama_swap macros define"
            )
        at = found.end()
    return None


def declared(block: Any) -> list[tuple[str, Any]]:
    """A ``macros:`` mapping as llama-swap keeps it: ordered (name, value) pairs."""
    return [(str(k), v) for k, v in block.items()] if isinstance(block, Mapping) else []


def macro_problem(name: str, value: Any) -> str | None:
    """llama-swap's validateMacro (:func:`.expand.check_macro`), as a problem or None."""
    try:
        check_macro(name, value)
    except ExpandError as exc:
        return str(exc)
    return None


def _substitute_all(value: Any, macros: list[tuple[str, Any]]) -> Any:
    if isinstance(value, str) and "${" not in value:
        return value  # no macro's pattern is in it: every substitution gives it back
    for name, replacement in reversed(macros):  # substituteMacroList: the last one first
        value = substitute(value, name, replacement)
    return value


def _holds_macro(value: Any) -> bool:
    """Whether a string in ``value`` holds ``${``. Every macro's pattern starts so: elsewhere
    each substitution gives the value back and no macro is left over, so the passes below,
    which copy the whole value once per macro, need only the values that hold one."""
    kind = type(value)
    if kind is str or isinstance(value, str):
        return "${" in value
    if kind is int or kind is float or kind is bool or value is None:
        return False  # the scalars of every entry, without the checks below
    if isinstance(value, dict):
        items: Iterable[Any] = value.values()
    elif isinstance(value, list):
        items = value
    else:
        return False
    for item in items:  # an entry's strings and numbers here, its lists and mappings by a call
        kind = type(item)
        if kind is str:
            if "${" in item:
                return True
        elif kind is int or kind is float or kind is bool or item is None:
            continue
        elif _holds_macro(item):
            return True
    return False


def _left_over(value: Any, where: str, allow_pid: bool) -> str | None:
    if isinstance(value, str):
        if "${" not in value:  # every substitution done: most values, no pattern to run
            return None
        for m in MACRO.finditer(value):
            if not (m.group(1) == "PID" and allow_pid):
                return f"{where} holds unknown macro {m.group(0)!r}"
        return None
    if isinstance(value, dict):
        items: Any = value.items()
    elif isinstance(value, list):
        items = enumerate(value)
    else:
        return None
    for key, item in items:
        found = _left_over(item, f"{where}.{key}", allow_pid)
        if found is not None:
            return found
    return None


def load_problems(data: Mapping[str, Any]) -> tuple[list[str], dict[str, str]]:
    """llama-swap's macro pass over a parsed document, after its ``${env.NAME}`` pass: the
    problems of the document as a whole, and of each model by id. Every top-level key is
    checked (llama-swap checks those it knows: stricter is safe)."""
    top: list[str] = []
    glob = declared(data.get("macros"))
    top += [p for n, v in glob if (p := macro_problem(n, v))]
    for key, value in data.items():
        if key in ("models", "macros") or not _holds_macro(value):
            continue
        found = _left_over(_substitute_all(value, glob), str(key), False)
        if found is not None:
            top.append(found)
    per_model: dict[str, str] = {}
    models = data.get("models")
    if not isinstance(models, Mapping):
        return top, per_model
    for model_id, body in models.items():
        if type(body) is not dict and not isinstance(body, Mapping):  # the ABC's check: slow
            continue
        problem = model_problem(str(model_id), body, glob)
        if problem is not None:
            per_model[str(model_id)] = problem
    return top, per_model


def _alias_problem(model_id: str, aliases: Any) -> str | None:
    """llama-swap's words for an alias a model names twice (one named by two models is
    refused where the settings are checked, before any document)."""
    if not isinstance(aliases, list):
        return None  # the shape check says what is wrong with it
    taken: set[str] = set()
    for alias in aliases:
        if isinstance(alias, str):
            if alias in taken:
                return f"duplicate alias {alias} found in model: {model_id}"
            taken.add(alias)
    return None


def model_problem(
    model_id: str, body: Mapping[Any, Any], glob: list[tuple[str, Any]]
) -> str | None:
    """What llama-swap refuses in one model's body: an alias named twice, then what its macro
    pass refuses (``glob``: the global macros): its own macros, checked, then ``cmd`` and
    ``cmdStop`` without their comment lines, ``proxy`` (llama-swap's default where unset) and
    every other value, each after the macros and ``${PORT}`` are substituted, in the body's
    order (an unset ``proxy`` last). Reads the body in place: only the values that hold a
    ``${`` are copied, by their substitution."""
    own = declared(body["macros"]) if "macros" in body else []
    bad = next((p for n, v in own if (p := macro_problem(n, v))), None) if own else None
    if bad is not None:
        return bad
    if "aliases" in body and (bad := _alias_problem(model_id, body["aliases"])):
        return bad
    merged = merge_macros(model_id, glob, own)
    cmd = body.get("cmd")
    if isinstance(cmd, str):
        cmd = strip_comments(cmd)
    proxy = body.get("proxy")
    if proxy is None:
        proxy = DEFAULT_PROXY
    cmd_done = _substitute_all(cmd, merged) if "cmd" in body else None
    proxy_done = _substitute_all(proxy, merged)
    cmd_port = isinstance(cmd_done, str) and "${PORT}" in cmd_done
    if not cmd_port and isinstance(proxy_done, str) and "${PORT}" in proxy_done:
        return "proxy uses ${PORT} but cmd does not"
    fields: Iterable[tuple[Any, Any]] = body.items()
    if "proxy" not in body:
        fields = (*body.items(), ("proxy", proxy))
    for field, value in fields:
        if field == "macros":
            continue
        if field == "cmd":
            value, done = cmd, cmd_done
        elif field == "proxy":
            value, done = proxy, proxy_done
        else:
            if field == "cmdStop" and isinstance(value, str):
                value = strip_comments(value)
            done = _UNDONE
        if not _holds_macro(value):
            continue  # no substitution changes it, and no macro is left in it
        value = _substitute_all(value, merged) if done is _UNDONE else done
        if cmd_port:
            value = substitute(value, "PORT", 5800)
        found = _left_over(value, str(field), field == "cmdStop")
        if found is not None:
            return found
    return None


_UNDONE = object()  # a value whose macros are not substituted yet
