"""How sizes and durations are shown to people: one unit system everywhere (binary, as ``list``)."""

from __future__ import annotations

__all__ = ["format_duration", "format_size"]

_UNITS = ("KiB", "MiB", "GiB", "TiB")


def format_size(n: float) -> str:
    """Bytes in binary units (``B``, ``KiB``, ``MiB``, ``GiB``): the one way sizes are shown."""
    value = float(n)
    if value < 1024:
        return f"{value:.0f} B"
    for unit in _UNITS:
        value /= 1024
        if value < 1024 or unit == _UNITS[-1]:
            return f"{value:.1f} {unit}"
    raise AssertionError("unreachable")  # pragma: no cover


def format_duration(seconds: float) -> str:
    """``0.4 s``, ``12 s``, ``3 min 05 s``: short and unambiguous."""
    if seconds < 10:
        return f"{seconds:.1f} s"
    if seconds < 60:
        return f"{seconds:.0f} s"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest:02d} s"
