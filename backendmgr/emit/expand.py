"""What llama-swap runs for one model entry: its argv and environment, computed as it does.

Pure (issue 28 point 3): ``verify``, ``--repair`` and ``tune`` start what :func:`expand` returns,
so a model they pass is the model llama-swap serves. A port of llama-swap 0bdb372's
``internal/config`` (``load.go``, ``macros.go``, ``commands.go``), in its order:

1. ``${env.NAME}`` is replaced textually (an unset NAME fails, as does a value holding a
   newline, CR or NUL). llama-swap does this on the YAML text with ``\\`` and ``"`` escaped for a
   double-quoted scalar, so the value arrives unchanged in a double-quoted scalar, the style
   the emitter uses for every scalar that holds ``${env.``: this function assumes it.
2. Comment lines of ``cmd`` are dropped; ``MODEL_ID``, the global and the model's ``macros``
   (declaration order, the model's overriding, the last declared substituted first) and then
   ``PORT`` (only when ``cmd`` holds ``${PORT}``) are substituted into ``cmd`` and ``env``.
3. Any ``${name}`` left is an unknown macro and fails, as llama-swap's load does.
4. ``cmd`` loses comment lines again, a trailing ``\\`` becomes a space, and the rest is split
   by POSIX shell words (:func:`posix_split`, billziss-gh/golib ``shlex.Posix``).

The environment is the caller's (llama-swap's own) with the entry's items appended, the last
value of a duplicate key winning, as Go's ``os/exec`` does.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = [
    "DEFAULT_PROXY",
    "ENV_MACRO",
    "MACRO_PATTERN",
    "ExpandError",
    "check_macro",
    "expand",
    "go_trim_space",
    "merge_macros",
    "posix_split",
    "sanitize_command",
    "strip_comments",
    "substitute",
]

# patterns only a macro or an ${env.NAME} asks for are compiled at the first (re's cache):
# an edit's entries hold neither
MACRO_NAME = r"[a-zA-Z0-9_-]+"  # fullmatch: Go's $ is the end of the text
MACRO_PATTERN = re.compile(r"\$\{([a-zA-Z0-9_-]+)\}")
ENV_MACRO = r"\$\{env\.([a-zA-Z_][a-zA-Z0-9_]*)\}"
RESERVED = frozenset({"PID", "PORT", "MODEL_ID"})
DEFAULT_PROXY = "http://localhost:${PORT}"  # llama-swap's MODEL_CONFIG_DEFAULT_PROXY
MACRO_NAME_LIMIT = 64

# Go's unicode.IsSpace (strings.TrimSpace): Python's str.isspace also counts \x1c-\x1f.
_GO_SPACE = "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008"
_GO_SPACE += "\u2009\u200a\u2028\u2029\u202f\u205f\u3000"


class ExpandError(ValueError):
    """What llama-swap would refuse the entry for, in its own words."""


def go_trim_space(text: str) -> str:
    """Go's ``strings.TrimSpace``."""
    return text.strip(_GO_SPACE)


# --- billziss-gh/golib shlex, the Posix dialect ------------------------------------------------

_SPACE, _WORD = " ", "A"  # parser states; a quote character is a state of its own
_NO_ESCAPE = object()
_EMPTY = object()  # Go's EmptyRune: the end of the line, or an escape that yields nothing


def _escape(state: str, r: str, r0: object) -> object:
    if r != "\\":
        return _NO_ESCAPE
    if state in (_SPACE, _WORD):
        return _EMPTY if r0 == "\n" or r0 is _EMPTY else r0
    if state == '"':
        if r0 == "\n" or r0 is _EMPTY:
            return _EMPTY
        return r0 if r0 in ("$", "`", '"', "\\") else _NO_ESCAPE
    return _NO_ESCAPE


def posix_split(line: str) -> list[str]:
    """``shlex.Posix.Split``, rune for rune: no error for an unclosed quote (the word ends at
    the end), ``''`` is an empty word, a backslash-newline joins, a final lone ``\\`` vanishes."""
    tokens: list[str] = []
    token: list[str] | None = None
    state = [_SPACE]
    if not line:
        return tokens
    n = len(line)
    r: str | None = line[0]
    pos = 1  # line[pos:] is what follows r
    while r is not None:
        r0: str | None = line[pos] if pos < n else None
        s = state[-1]
        e = _escape(s, r, _EMPTY if r0 is None else r0)
        if e is not _NO_ESCAPE:
            if r0 is not None:
                pos += 1
                r0 = line[pos] if pos < n else None
            if e is _EMPTY:
                r = r0
                pos += 1
                continue
        escaped = e if isinstance(e, str) else None
        if s == _SPACE:
            if escaped is not None:
                state.append(_WORD)
                token = [*(token or []), escaped]
            elif r in "\"'":
                state += [_WORD, r]
                token = []
            elif r not in " \t\n":
                state.append(_WORD)
                token = [*(token or []), r]
        elif s == _WORD:
            assert token is not None
            if escaped is not None:
                token.append(escaped)
            elif r in "\"'":
                state.append(r)
            elif r in " \t\n":
                state.pop()
                tokens.append("".join(token))
                token = None
            else:
                token.append(r)
        else:  # inside a quote
            assert token is not None
            if escaped is not None:
                token.append(escaped)
            elif r == s:
                state.pop()
            else:
                token.append(r)
        r = r0
        pos += 1
    if token is not None:
        tokens.append("".join(token))
    return tokens


def strip_comments(cmd: str) -> str:
    """llama-swap's ``StripComments``: lines whose trimmed text starts with ``#`` go."""
    if "#" not in cmd:  # no comment line: every entry backendmgr plans
        return cmd
    return "\n".join(line for line in cmd.split("\n") if not go_trim_space(line).startswith("#"))


def sanitize_command(cmd: str) -> list[str]:
    """llama-swap's ``SanitizeCommand`` on POSIX: comment lines dropped, a trailing ``\\``
    (after trimming) turned into a space, then shell words."""
    lines: list[str] = []
    for line in cmd.split("\n"):
        trimmed = go_trim_space(line)
        if trimmed.startswith("#"):
            continue
        lines.append(trimmed[:-1] + " " if trimmed.endswith("\\") else line)
    args = posix_split("\n".join(lines))
    if not args:
        raise ExpandError("empty command")
    return args


# --- macros --------------------------------------------------------------------------------


def _go_float(value: float, eprec: int) -> str:
    """strconv.FormatFloat(value, 'g', -1, 64) with Go's exponent threshold ``eprec``: 21 for
    ``fmt``'s ``%v``, 6 for the 'g' yaml.v3 writes."""
    if value != value:
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "+Inf" if value > 0 else "-Inf"
    from decimal import Decimal  # a float macro value is rare: loaded when one is written

    sign, digits, exponent = Decimal(repr(value)).normalize().as_tuple()
    assert isinstance(exponent, int)
    text = "".join(map(str, digits)) if any(digits) else "0"
    exp = len(text) + exponent - 1 if any(digits) else 0
    minus = "-" if sign else ""
    if exp < -4 or exp >= eprec:
        mantissa = text[0] + ("." + text[1:] if len(text) > 1 else "")
        return f"{minus}{mantissa}e{'-' if exp < 0 else '+'}{abs(exp):02d}"
    if exp < 0:
        return f"{minus}0.{'0' * (-exp - 1)}{text}"
    whole = text[: exp + 1].ljust(exp + 1, "0")
    rest = text[exp + 1 :]
    return f"{minus}{whole}" + (f".{rest}" if rest else "")


def _go_v(value: Any) -> str:
    """``fmt.Sprintf("%v", value)`` for the scalars a macro may hold."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return _go_float(value, 21)
    return str(value)


def _as_string(value: Any) -> str:
    """A value that replaced a whole string, as yaml.v3 writes it and reads it back as a
    string (``node.Encode`` then ``Decode`` into the ``string`` field)."""
    if isinstance(value, float):
        text = _go_float(value, 6)
        return {"+Inf": ".inf", "-Inf": "-.inf", "NaN": ".nan"}.get(text, text)
    return value if isinstance(value, str) else _go_v(value)


def check_macro(name: str, value: Any) -> None:
    """llama-swap's ``validateMacro``."""
    if len(name) >= MACRO_NAME_LIMIT:
        raise ExpandError(f"macro name '{name}' exceeds maximum length of 63 characters")
    if not re.fullmatch(MACRO_NAME, name):
        raise ExpandError(
            f"macro name '{name}' contains invalid characters, must match pattern ^[a-zA-Z0-9_-]+$"
        )
    if isinstance(value, str):
        if f"${{{name}}}" in value:
            raise ExpandError(f"macro '{name}' contains self-reference")
    elif not isinstance(value, bool | int | float):
        raise ExpandError(
            f"macro '{name}' has invalid type {type(value).__name__}, must be a scalar type "
            "(string, int, float, or bool)"
        )
    if name in RESERVED:
        raise ExpandError(f"macro name '{name}' is reserved")


def substitute(value: Any, name: str, macro: Any) -> Any:
    """``substituteMacroInValue``: a whole-string match takes the typed value, mappings and
    lists are walked (their keys are no macro targets)."""
    slug = f"${{{name}}}"  # made once per walk: a read screens every model's entry with it
    if isinstance(value, str):  # most values: no walk to set up
        if value == slug:
            return macro
        return value.replace(slug, _go_v(macro)) if slug in value else value

    def walk(item: Any) -> Any:
        if isinstance(item, str):
            if item == slug:
                return macro
            return item.replace(slug, _go_v(macro)) if slug in item else item
        if isinstance(item, dict):
            return {k: walk(v) for k, v in item.items()}
        if isinstance(item, list):
            return [walk(v) for v in item]
        return item

    return walk(value)


def merge_macros(
    model_id: str, declared: Sequence[tuple[str, Any]], local: Sequence[tuple[str, Any]]
) -> list[tuple[str, Any]]:
    """``mergeModelMacros``: MODEL_ID, the global macros, the model's overriding in place or
    appended, in declaration order."""
    merged: list[tuple[str, Any]] = [("MODEL_ID", model_id), *declared]
    for name, value in local:
        at = next((i for i, (known, _) in enumerate(merged) if known == name), None)
        if at is None:
            merged.append((name, value))
        else:
            merged[at] = (name, value)
    return merged


def _substitute_env(texts: list[Any], environ: Mapping[str, str]) -> list[Any]:
    """Phase 1 of ``LoadConfigFromReader``: every ``${env.NAME}`` found, in order of
    appearance, replaced everywhere it occurs."""
    found = [m for t in texts if isinstance(t, str) for m in re.finditer(ENV_MACRO, t)]
    out = list(texts)
    for match in found:
        name = match.group(1)
        if name not in environ:
            raise ExpandError(f"environment variable '{name}' is not set")
        value = environ[name]
        if any(ch in value for ch in "\n\r\x00"):
            raise ExpandError(
                f"environment variable '{name}' contains newlines or null bytes which are not "
                "allowed in YAML substitution"
            )
        out = [t.replace(match.group(0), value) if isinstance(t, str) else t for t in out]
    return out


def _check_uses(model_id: str, cmd: str, env: Sequence[str], proxy: str) -> None:
    """``validateMacroUses`` for the fields this function reads."""
    for field, text in (("cmd", cmd), ("proxy", proxy)):
        hit = MACRO_PATTERN.search(text)
        if hit is not None:
            raise ExpandError(f"unknown macro '${{{hit.group(1)}}}' found in {model_id}.{field}")
    for index, item in enumerate(env):
        hit = MACRO_PATTERN.search(item)
        if hit is not None:
            raise ExpandError(f"model {model_id} env: unknown macro '${{{hit.group(1)}}}'")
        env_hit = re.search(ENV_MACRO, item)
        if env_hit is not None:
            raise ExpandError(
                f"models.{model_id}.env[{index}]: environment variable '{env_hit.group(1)}' not set"
            )
    env_hit = re.search(ENV_MACRO, cmd)
    if env_hit is not None:
        raise ExpandError(
            f"models.{model_id}.cmd: environment variable '{env_hit.group(1)}' not set"
        )


def _environment(base: Mapping[str, str], items: Sequence[str]) -> dict[str, str]:
    """``append(os.Environ(), env...)`` as Go's exec dedups it: the last value of a key wins,
    an item without ``=`` after its first character is no variable, NUL refuses the start."""
    out = dict(base)
    for item in items:
        if "\x00" in item:
            raise ExpandError("exec: environment variable contains NUL")
        cut = item.find("=", 1)
        if cut < 0 or "=" in item[:cut]:  # no variable a child can read by name
            continue
        out[item[:cut]] = item[cut + 1 :]
    return out


def expand(
    model_id: str,
    cmd: str,
    env: Sequence[str],
    *,
    port: int,
    environ: Mapping[str, str],
    macros: Mapping[str, Any] | None = None,
    model_macros: Mapping[str, Any] | None = None,
    proxy: str | None = None,
) -> tuple[list[str], dict[str, str]]:
    """The argv and the environment llama-swap starts the entry ``model_id`` with, given the
    port it allocated and its own environment; :class:`ExpandError` where it would refuse the
    config (its message is llama-swap's). ``proxy`` (llama-swap's default when None) only
    decides refusals: a ``${PORT}`` there needs one in ``cmd``."""
    declared = [(str(k), v) for k, v in (macros or {}).items()]
    local = [(str(k), v) for k, v in (model_macros or {}).items()]
    proxy = DEFAULT_PROXY if proxy is None else proxy
    texts = _substitute_env([cmd, proxy, *env, *(v for _, v in declared + local)], environ)
    cmd_text: Any = texts[0]
    proxy_text: Any = texts[1]
    env_items: list[Any] = texts[2 : 2 + len(env)]
    values = iter(texts[2 + len(env) :])
    declared = [(name, next(values)) for name, _ in declared]
    local = [(name, next(values)) for name, _ in local]
    for name, value in declared:  # checked after phase 1, as llama-swap does
        check_macro(name, value)
    for name, value in local:
        try:
            check_macro(name, value)
        except ExpandError as exc:
            raise ExpandError(f"model {model_id}: {exc}") from None
    merged = merge_macros(model_id, declared, local)
    cmd_text = strip_comments(cmd_text)
    for name, value in [*reversed(merged), ("PORT", port)]:
        if name == "PORT":  # allocated only for a cmd that asks for it
            cmd_port = isinstance(cmd_text, str) and "${PORT}" in cmd_text
            if not cmd_port and isinstance(proxy_text, str) and "${PORT}" in proxy_text:
                raise ExpandError(
                    f"model {model_id}: proxy uses ${{PORT}} but cmd does not - ${{PORT}} is "
                    "only available when used in cmd"
                )
            if not cmd_port:
                break
        cmd_text = substitute(cmd_text, name, value)
        proxy_text = substitute(proxy_text, name, value)
        env_items = [substitute(item, name, value) for item in env_items]
    cmd_text = _as_string(cmd_text)
    env_list = [_as_string(item) for item in env_items]
    _check_uses(model_id, cmd_text, env_list, _as_string(proxy_text))
    argv = sanitize_command(cmd_text)
    if any("\x00" in arg for arg in argv):
        raise ExpandError(f"failed to start command '{' '.join(argv)}': invalid argument")
    return argv, _environment(environ, env_list)
