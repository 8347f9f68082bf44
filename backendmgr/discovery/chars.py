"""The characters no id, path or value backendmgr writes may hold: control, format and
line-separator characters (a newline or NUL that breaks a YAML line, a command line or a
terminal, a bidi override that spoofs a name). Apart from :mod:`.models`, so the config's
checks use the rule without loading discovery's records."""

from __future__ import annotations

__all__ = ["printable", "unsafe_char"]

_UNSAFE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})


def unsafe_char(text: str) -> str | None:
    """The first character of ``text`` that no id or path may hold, as ``U+XXXX``."""
    if text.isascii() and text.isprintable():  # no ASCII character but a control is unsafe
        return None
    import unicodedata  # an extension module: loaded by the first name that is not plain

    for ch in text:
        if unicodedata.category(ch) in _UNSAFE_CATEGORIES:
            return f"U+{ord(ch):04X}"
    return None


def printable(text: str) -> str:
    """``text`` with each such character shown as ``?``."""
    import unicodedata

    return "".join("?" if unicodedata.category(ch) in _UNSAFE_CATEGORIES else ch for ch in text)
