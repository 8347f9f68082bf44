"""Errors that reach a user.

Every message is one sentence that says what went wrong and, where it helps, what to do next.
The CLI prints it as ``error: <message>`` and exits 1 (130 for :class:`Cancelled`).

    BackendmgrError
    ├── InvalidInput        a value the user typed is wrong (unknown key, bad number, bad id)
    │   └── ConfigError     the config file or a manifest cannot be used (names file and line)
    ├── NotFound            an unknown component, variant, build, row or model
    ├── Refused             the request is valid but would break a rule (activated build, ★ …)
    ├── NetworkError        the network or a release API failed (status, rate limit, offline)
    ├── VerificationError   a download does not match its published size or checksum
    ├── UnsafeArchive       an archive tries to write outside its folder, or is a bomb
    ├── InstallFailed       the build does not run, or its installer failed
    └── Cancelled           Ctrl-C or a cancelled task
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = [
    "BackendmgrError",
    "Cancelled",
    "ConfigError",
    "InstallFailed",
    "InvalidInput",
    "MalformedId",
    "NetworkError",
    "NotFound",
    "Refused",
    "UnsafeArchive",
    "VerificationError",
    "close_matches",
    "did_you_mean",
    "escaped",
    "unknown",
]


class BackendmgrError(Exception):
    """Base of every error meant for a user; ``str(err)`` is the one-line message."""

    exit_code = 1


class InvalidInput(BackendmgrError):
    """Raised when a value given on the command line or through the API is invalid."""


class ConfigError(InvalidInput):
    """Raised when the config file or a manifest cannot be read or fails validation."""


class NotFound(BackendmgrError):
    """Raised when a named component, variant, build, row or model does not exist."""


class Refused(BackendmgrError):
    """Raised when a valid request would break a registry or install rule."""


class NetworkError(BackendmgrError):
    """Raised when a download or release listing fails, or the network is switched off."""


class VerificationError(BackendmgrError):
    """Raised when a download's size or checksum does not match what was published."""


class UnsafeArchive(BackendmgrError):
    """Raised when an archive member would land outside the build folder, or is a bomb."""


class InstallFailed(BackendmgrError):
    """Raised when a build's smoke check or its package installer fails."""


class Cancelled(BackendmgrError):
    """Raised when the user interrupts an operation; nothing is half-done."""

    exit_code = 130


def close_matches(word: str, candidates: Iterable[str], *, limit: int = 3) -> list[str]:
    """The known names nearest to a mistyped one, best first (empty when nothing is close)."""
    import difflib

    return difflib.get_close_matches(word, sorted(set(candidates)), n=limit, cutoff=0.6)


def did_you_mean(word: str, candidates: Iterable[str]) -> str:
    """``'; did you mean a or b?'`` for a mistyped name, or ``''``: the one wording everywhere."""
    found = close_matches(word, candidates)
    if not found:
        return ""
    shown = found[0] if len(found) == 1 else ", ".join(found[:-1]) + " or " + found[-1]
    return f"; did you mean {shown}?"


def unknown(
    message: str,
    name: str,
    candidates: Iterable[str],
    *,
    hint: str = "",
    always_hint: bool = False,
    error: type[BackendmgrError] = NotFound,
) -> BackendmgrError:
    """The error for a name that is not known: ``message; did you mean X?`` when one is close,
    else ``message; hint``; ``always_hint`` keeps a short list even after a suggestion
    (``…; did you mean X? (hint)``). Every "no such component, variant, build, row, model,
    kind or key" goes through here."""
    close = did_you_mean(name, candidates)
    if close:
        return error(message + close + (f" ({hint})" if always_hint and hint else ""))
    return error(message + (f"; {hint}" if hint else ""))


class MalformedId(InvalidInput):
    """An id whose shape is wrong whatever the registry holds (a control character, a ``/``,
    far too long): a usage error, so exit status 2 (SPEC §13)."""

    exit_code = 2


def escaped(text: str, limit: int = 2000) -> str:
    """``text`` fit for a one-line message: unprintable characters (an id's newline or NUL,
    a bidi override) written as escapes, and at most ``limit`` characters kept."""
    body = "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in text[:limit])
    return body + ("…" if len(text) > limit else "")
