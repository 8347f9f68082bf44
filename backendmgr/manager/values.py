"""What ``set`` and ``unset`` take from the command line: the keys, each ``KEY=VALUE`` as the
value its field holds, and the override they make (read without pydantic where it can be)."""

from __future__ import annotations

import re
from dataclasses import fields
from typing import Annotated, Any, get_args, get_origin

from ..config.models import ModelOverride
from ..errors import InvalidInput, UsageError, unknown
from ..record import Invalid, hints, load, validate

__all__ = ["SETTABLE_KEYS", "check_key", "first_error", "override_of", "parse_value"]

# Keys of a model override that ``set``/``unset`` handle; ``backend`` goes through ``pin``.
SETTABLE_KEYS: tuple[str, ...] = tuple(f.name for f in fields(ModelOverride) if f.name != "backend")


def check_key(key: str) -> None:
    """Refuse a key ``set``/``unset`` does not take, naming the nearest."""
    if key == "backend":
        raise InvalidInput('use "backendmgr pin MODEL ROW" / "backendmgr unpin MODEL" for backend')
    if key not in SETTABLE_KEYS:
        raise unknown(
            f'unknown key "{key}"',
            key,
            SETTABLE_KEYS,
            hint=f"known keys: {', '.join(SETTABLE_KEYS)}",
            error=InvalidInput,
        )


def parse_value(key: str, text: str) -> Any:
    """Strings from the command line (``llama_swap``'s YAML parsed); :func:`override_of` turns
    numbers and booleans into their types."""
    check_key(key)
    if key == "llama_swap":
        from .._yaml import load_yaml
        from ..errors import ConfigError

        try:
            value = load_yaml(text, "llama_swap")
        except ConfigError as exc:
            raise UsageError(f"{exc}; llama_swap must be a YAML mapping") from exc
        if not isinstance(value, dict):
            raise UsageError("llama_swap must be a YAML mapping like '{aliases: [x]}'")
        return value
    return text


_DECIMAL = r"(0|[1-9][0-9]{0,17})(\.[0-9]{1,17})?"
_BOOLS = {"true": True, "false": False}


def override_of(data: dict[str, Any]) -> ModelOverride:
    """``data`` (``set``'s values as typed, over the stored override) as a ModelOverride.

    Read strictly (:func:`..record.load`, every field check and rule) after the plain
    spellings of a number or boolean (``4096``, ``0.9``, ``true``) are turned into one, as
    pydantic would turn them; anything else (and anything the strict read refuses) is
    validated by pydantic, whose coercions and error messages ``set`` has always had. So an
    edit imports no pydantic, and what it stores is what pydantic would have made."""
    try:
        return load(ModelOverride, {k: _typed(k, v) for k, v in data.items()}, "set")
    except Invalid:
        return validate(ModelOverride, data)


def _typed(key: str, value: Any) -> Any:
    """``value`` in its field's type when it is the plain spelling of one, else as it is."""
    if not isinstance(value, str):
        return value
    kind = _scalar_of(key)
    if kind is int and _whole(value):
        return int(value)
    if kind is float and re.fullmatch(_DECIMAL, value):
        return float(value)
    if kind is bool and value in _BOOLS:
        return _BOOLS[value]
    return value


def _whole(text: str) -> bool:
    """``0`` or up to 18 ASCII digits without a leading zero: a whole number as typed (the
    pattern ``0|[1-9][0-9]{0,17}``, without compiling one for the number every edit types)."""
    return (
        0 < len(text) <= 18
        and text.isascii()
        and text.isdigit()
        and (text[0] != "0" or text == "0")
    )


def _scalar_of(key: str) -> type | None:
    """``int``, ``float`` or ``bool`` when ModelOverride's field ``key`` holds one (or None)."""
    hint = hints(ModelOverride).get(key)
    while get_origin(hint) is Annotated:
        hint = get_args(hint)[0]
    kinds = [a for a in get_args(hint) if a is not type(None)] or [hint]
    return kinds[0] if len(kinds) == 1 and kinds[0] in (int, float, bool) else None


def first_error(exc: Exception) -> str:
    """The one line a refused value says (pydantic's, for what pydantic refused)."""
    from pydantic import ValidationError

    from ..errors import validation_problem

    return validation_problem(exc).line() if isinstance(exc, ValidationError) else str(exc)
