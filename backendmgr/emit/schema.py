"""The constraints llama-swap's JSON schema puts on the string fields of a model, as the
product can know them at run time (pure; tests check them against the schema itself)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["STRING_FIELDS", "string_field_problems"]

_DOT = "[^\n\r\u2028\u2029]"  # the schema's "." (ECMA-262: no line terminator)

# field → (most characters, the schema's pattern, as Python matches it whole); a pattern as
# text, compiled by ``re`` when a value is first checked against it (every read loads these
# rules with the settings, few configs set the field)
STRING_FIELDS: dict[str, tuple[int | None, tuple[str, str] | None]] = {
    "cmdStop": (None, None),
    "name": (128, None),
    "description": (1024, None),
    "proxy": (None, None),
    "checkEndpoint": (None, ("^/.*$|^none$", f"/{_DOT}*|none")),
    "useModelName": (None, None),
}


def string_field_problems(body: Mapping[str, Any], where: str) -> list[str]:
    """What the schema refuses in the string fields of a model's mapping ``body``."""
    problems = []
    for field, (most, pattern) in STRING_FIELDS.items():
        if field not in body:
            continue
        value = body[field]
        if not isinstance(value, str):
            problems.append(f"{where}.{field} must be a string")
        elif most is not None and len(value) > most:
            problems.append(f"{where}.{field} is {len(value)} characters long; the most is {most}")
        elif pattern is not None and not re.fullmatch(pattern[1], value):
            problems.append(f"{where}.{field} must match {pattern[0]}")
    return problems
