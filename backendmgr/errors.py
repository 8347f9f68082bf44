"""Errors that reach a user.

Every message is one sentence that says what went wrong and, where it helps, what to do next.
Each class carries the CLI's exit status and the API's HTTP status; ``boundary.failure_of`` is
the one function that turns *any* exception into ``(message, exit, status)`` for both faces.

    class                   exit  HTTP
    BackendmgrError            1   500
    ├── InvalidInput           2   422  a value the user typed is wrong (unknown key, bad number)
    │   ├── ConfigError        1   422  the config, a manifest, a lock or receipt is unusable
    │   └── UsageError         2   422  a malformed request: a usage error (SPEC §13)
    │       └── MalformedId    2   422  an id whose shape is wrong (control character, ``/``)
    ├── NotFound               1   404  what the world lacks: no such release, nothing installed
    │   └── Unknown            2   404  a name the user typed that is not known (``unknown()``)
    ├── Refused                1   409  valid, but would break a rule (activated build, ★ …)
    ├── NetworkError           1   502  the network, a release API or a package index failed
    ├── VerificationError      1   502  a download does not match its size or checksum
    ├── UnsafeArchive          1   502  an archive writes outside its folder, or is a bomb
    ├── InstallFailed          1   500  the build does not run, or its installer failed
    └── Cancelled            130   409  Ctrl-C or a cancelled task

The exit rule (SPEC §13, issue 33): what the user typed wrong, an unknown command, option,
key, value, component, row or address, is 2; what the world refused is 1; Ctrl-C is 130. A
file backendmgr reads (the config, a lock) that is wrong is the world's: 1.

Anything else: an ``OSError`` is its ``strerror`` and file (1, 500), a timeout says so (1, 504),
an httpx error is the network map's line (1, 502), a pydantic error names its field (1, 500),
and the rest is ``internal error: <type>`` (1, 500): never a traceback (``--debug`` shows it).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from pydantic import ValidationError

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
    "Unknown",
    "UnsafeArchive",
    "UsageError",
    "ValidationProblem",
    "VerificationError",
    "close_matches",
    "did_you_mean",
    "escaped",
    "first_error",
    "is_cancel",
    "unknown",
    "validation_problem",
]


class BackendmgrError(Exception):
    """Base of every error meant for a user; ``str(err)`` is the one-line message.

    A subclass states what differs from its base in its header, as the table above reads:
    ``class NotFound(BackendmgrError, http=404)``."""

    exit_code = 1
    http_status = 500

    def __init_subclass__(cls, *, exit: int | None = None, http: int | None = None) -> None:
        super().__init_subclass__()
        if exit is not None:
            cls.exit_code = exit
        if http is not None:
            cls.http_status = http


class InvalidInput(BackendmgrError, exit=2, http=422):
    """Raised when a value given on the command line or through the API is invalid: the user
    typed it wrong, so exit status 2 (SPEC §13)."""


class ConfigError(InvalidInput, exit=1):
    """Raised when the config file or a manifest cannot be read or fails validation: a file,
    not what was typed, so exit status 1."""


class NotFound(BackendmgrError, http=404):
    """Raised when what the world holds lacks something: a release, an asset, an install."""


class Unknown(NotFound, exit=2):
    """A component, variant, build, row or model name the user typed that is not known: exit
    status 2 (SPEC §13); raised through :func:`unknown`."""


class Refused(BackendmgrError, http=409):
    """Raised when a valid request would break a registry or install rule."""


class NetworkError(BackendmgrError, http=502):
    """Raised when a download or release listing fails, or the network is switched off."""


class VerificationError(BackendmgrError, http=502):
    """Raised when a download's size or checksum does not match what was published."""


class UnsafeArchive(BackendmgrError, http=502):
    """Raised when an archive member would land outside the build folder, or is a bomb."""


class InstallFailed(BackendmgrError):
    """Raised when a build's smoke check or its package installer fails."""


class Cancelled(BackendmgrError, exit=130, http=409):
    """Raised when the user interrupts an operation; nothing is half-done."""


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
    error: type[BackendmgrError] = Unknown,
) -> BackendmgrError:
    """The error for a name that is not known: ``message; did you mean X?`` when one is close,
    else ``message; hint``; ``always_hint`` keeps a short list even after a suggestion
    (``…; did you mean X? (hint)``). Every "no such component, variant, build, row, model,
    kind or key" goes through here."""
    close = did_you_mean(name, candidates)
    if close:
        return error(message + close + (f" ({hint})" if always_hint and hint else ""))
    return error(message + (f"; {hint}" if hint else ""))


class UsageError(InvalidInput, exit=2):
    """A malformed request (a body that is not JSON, a flag that is not true or false): exit
    status 2, like a CLI usage error (SPEC §13)."""


class MalformedId(UsageError):
    """An id whose shape is wrong whatever the registry holds (a control character, a ``/``,
    far too long): a usage error, so exit status 2 (SPEC §13)."""


def escaped(text: str, limit: int = 2000) -> str:
    """``text`` fit for a one-line message: unprintable characters (an id's newline or NUL,
    a bidi override) written as escapes, and at most ``limit`` characters kept."""
    body = "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in text[:limit])
    return body + ("…" if len(text) > limit else "")


def shown(text: object, limit: int = 400) -> str:
    """What another program said (llama-swap, whatever holds its port), fit for a terminal, a
    JSON field and the page: :func:`escaped` after folding every run of whitespace (newlines
    included: no fake ``error:`` line) into one space."""
    return escaped(" ".join(str(text).split()), limit)


# --- reading exception groups and pydantic errors (for the boundary, ``boundary.py``) ------


def first_error(exc: BaseException) -> BaseException:
    """The error to report from an exception group (concurrent downloads, a task group): a
    Ctrl-C, else the first user-facing one, else the first that is not a cancellation."""
    leaves: list[BaseException] = []

    def walk(err: BaseException) -> None:
        if isinstance(err, BaseExceptionGroup):
            for sub in err.exceptions:
                walk(sub)
        else:
            leaves.append(err)

    walk(exc)
    for leaf in leaves:
        if _ctrl_c(leaf):
            return leaf
    for leaf in leaves:
        if isinstance(leaf, BackendmgrError) and not isinstance(leaf, Cancelled):
            return leaf
    return next((leaf for leaf in leaves if not is_cancel(leaf)), leaves[0] if leaves else exc)


def is_cancel(exc: BaseException) -> bool:
    """Ctrl-C or a cancelled task. asyncio is looked at, never imported: a Ctrl-C that lands
    while it first imports leaves it half made, and importing it again fails on that."""
    if isinstance(exc, Cancelled) or _ctrl_c(exc):
        return True
    cancelled = getattr(sys.modules.get("asyncio"), "CancelledError", None)
    return isinstance(cancelled, type) and isinstance(exc, cancelled)


def _ctrl_c(exc: BaseException | None) -> bool:
    """A Ctrl-C, or an error it caused: Python reports an exception raised where it calls into
    a class being made (``__set_name__``, as an import defines its classes) as a RuntimeError
    caused by it, and a Ctrl-C that lands there is a Ctrl-C all the same."""
    for _ in range(16):
        if exc is None:
            return False
        if isinstance(exc, KeyboardInterrupt):
            return True
        exc = exc.__cause__
    return False


class ValidationProblem:
    """The first problem of a pydantic error, in this project's words (a plain class,
    immutable by type: a named tuple costs every command's start its making, for an error
    few commands ever meet)."""

    __slots__ = ("field", "kind", "loc", "message")

    loc: Final[tuple[int | str, ...]]  # the path to the field, validator names left out
    field: Final[str]  # ``backends[0].path``; empty at the top level
    kind: Final[str]  # pydantic's error type (``extra_forbidden``, ``missing`` …)
    message: Final[str]  # pydantic's text without "Value error, "

    def __init__(self, loc: tuple[int | str, ...], field: str, kind: str, message: str) -> None:
        self.loc = loc
        self.field = field
        self.kind = kind
        self.message = message

    def line(self, source: str = "") -> str:
        """``source: field: message``, leaving out what is empty."""
        return ": ".join(part for part in (source, self.field, self.message) if part)

    def input_line(self) -> str:
        """A request's problem as the CLI and the API both say it: ``limit: must be 1 or
        more, not 0`` (the message's first letter lowered; names keep their case)."""
        said = self.message[:1].lower() + self.message[1:]
        return f"{self.field or 'request'}: {said}"


def validation_problem(exc: ValidationError) -> ValidationProblem:
    """The one reading of a pydantic ``ValidationError`` (config, manifest, lock, receipt,
    cache, request body): never its multi-line dump."""
    errors = exc.errors(include_url=False)
    if not errors:
        return ValidationProblem((), "", "invalid", "invalid value")
    err = errors[0]
    loc = tuple(
        p for p in err["loc"] if isinstance(p, int | str) and not str(p).startswith("function-")
    )
    field = ""
    for part in loc:
        field += f"[{part}]" if isinstance(part, int) else (f".{part}" if field else str(part))
    kind = err["type"]
    message = escaped(err["msg"].removeprefix("Value error, "), 500)
    if kind == "unexpected_keyword_argument":  # a request (a dataclass) given a key it lacks
        kind, message = "extra_forbidden", "Extra inputs are not permitted"
    elif kind == "dataclass_type":  # a request's body that is not a JSON object
        kind, message = "dict_type", "Input should be a valid dictionary"
    return ValidationProblem(loc, escaped(field, 200), kind, message)
