"""Why a server did not start: the known causes as data, and a pure classifier over its output.

A row per cause: a code, the patterns that recognise it in the server's last lines (exit
status included), a one-line explanation and the commands that fix it. A fix is the first
template whose placeholders the caller can fill (``{better}`` is only known when a newer build
is installed); every value is shell-quoted, so the command can be pasted as shown. A failure
no row recognises keeps the plain reason (exit status and last lines) and gets no cause.
"""

from __future__ import annotations

import functools
import re
import shlex
from collections.abc import Mapping

from ..immutable import frozen
from .cause import FailureCause, cause_text

__all__ = ["CAUSES", "Cause", "FailureCause", "Match", "cause_text", "classify", "explain"]

SCANNED_CHARS = 64 << 10  # of a reason text: the tail is bounded already, this is a backstop
VALUE_CHARS = 120  # of a captured value shown in a line


@frozen(slots=True)
class Cause:
    """One known cause: its code, the patterns that recognise it, its line and fixes."""

    code: str
    patterns: tuple[str, ...]
    line: str  # may name the patterns' groups, e.g. {arch}
    fixes: tuple[str, ...]  # command templates; the first whose fields are known is used
    memory: bool = False  # a smaller context or budget can help (``tune`` keeps bisecting)


_P = r"[^'\"\s]{1,400}"  # a quoted path or name
CAUSES: tuple[Cause, ...] = (
    Cause(
        "port-in-use",
        (
            r"couldn't bind HTTP server socket, hostname: [^,]{0,200}, port: (?P<port>\d{1,5})",
            r"\[Errno 98\][^|]{0,200}address already in use",
            r"bind\(\)[^|]{0,80}Address already in use",
        ),
        "another program took the port before the server could bind it",
        ("backendmgr verify {model}",),
    ),
    Cause(
        "missing-library",
        (
            r"error while loading shared libraries: (?P<lib>[^:\s]{1,120}): cannot open shared",
            r"ImportError: (?P<lib>lib[^:\s]{1,120}): cannot open shared object file",
            r"Library not loaded: (?P<lib>[^\s|]{1,120})",
        ),
        "the build needs {lib}, which this host does not have (a variant for another driver)",
        ("backendmgr install {component}", "backendmgr catalog"),
    ),
    Cause(
        "unknown-architecture",
        (
            r"unknown model architecture: '(?P<arch>[^']{1,120})'",
            r"Model architectures? \[?'(?P<arch>[^']{1,120})'\]? (?:are|is) not supported",
            r"model type `(?P<arch>[^`]{1,120})` but Transformers does not recognize",
        ),
        "this build does not know the model's architecture '{arch}'",
        ("backendmgr pin {model} {better}", "backendmgr update {component}", "backendmgr catalog"),
    ),
    Cause(
        "model-missing",
        (
            rf"failed to open GGUF file '(?P<path>{_P})' \(No such file or directory\)",
            rf"No such file or directory: '(?P<path>{_P})'",
        ),
        "the model file {path} is gone",
        ("backendmgr generate",),
    ),
    Cause(
        "model-unreadable",
        (
            rf"failed to open GGUF file '(?P<path>{_P})'",
            rf"PermissionError: \[Errno 13\] Permission denied: '(?P<path>{_P})'",
            r"error loading model: [^|]{0,200}failed to open (?P<path>[^:|]{1,400}): Permission",
        ),
        "the model file {path} cannot be read",
        ("chmod a+r {path}",),
    ),
    Cause(
        "out-of-memory",
        (
            r"cudaMalloc failed: out of memory",
            r"hipMalloc failed: out of memory",
            r"CUDA error: out of memory",
            r"(?:CUDA|HIP) out of memory",
            r"OutOfMemoryError",
            r"ErrorOutOfDeviceMemory",
            r"kIOGPUCommandBufferCallbackErrorOutOfMemory",
            r"failed to allocate",
            r"No available memory for the cache blocks",
            r"larger than the maximum number of tokens that can be stored in KV cache",
            r"KV cache is needed, which is larger than the available KV cache memory",
        ),
        "out of memory loading the model or allocating its KV cache at this context",
        ("backendmgr tune {model}",),
        memory=True,
    ),
    Cause(
        "never-healthy",  # serve_check's own words for a start that ran out of time
        (r"^not healthy within (?P<seconds>\d{1,9}(?:\.\d{1,9})?) s$",),
        "a load slower than {seconds} s, a checkEndpoint it does not serve, or a hang; "
        "not a memory failure",
        ("backendmgr {verb} {model} --timeout {longer}", "backendmgr cmd {model}"),
    ),
    Cause(
        "silent-exit",
        (r"^(?:exited with status -?\d+|was killed by signal \d+)$",),
        "the server exited at once without a word",
        ("backendmgr cmd {model}",),
    ),
)


@functools.cache
def _compiled() -> tuple[tuple[Cause, tuple[re.Pattern[str], ...]], ...]:
    """The causes' patterns, compiled at the first failure read (a read never needs them)."""
    return tuple(
        (cause, tuple(re.compile(p, re.IGNORECASE) for p in cause.patterns)) for cause in CAUSES
    )


@frozen(slots=True)
class Match:
    """The cause a failure's text matched, with what the pattern's groups captured."""

    cause: Cause
    found: Mapping[str, str]  # the pattern's named groups that matched


def classify(reason: str | None) -> Match | None:
    """The first row (table order) one of whose patterns occurs in ``reason``."""
    if not reason:
        return None
    text = reason[-SCANNED_CHARS:]
    for cause, patterns in _compiled():
        for pattern in patterns:
            hit = pattern.search(text)
            if hit is not None:
                found = {k: v for k, v in hit.groupdict().items() if v}
                return Match(cause, found)
    return None


def _fields(template: str) -> set[str]:
    import string  # a failure to explain: ``models`` reads its causes without one

    return {name for _, name, _, _ in string.Formatter().parse(template) if name}


def _shown(value: str) -> str:
    cleaned = "".join(ch if ch.isprintable() else "?" for ch in value)
    return cleaned if len(cleaned) <= VALUE_CHARS else cleaned[: VALUE_CHARS - 1] + "…"


def explain(match: Match, context: Mapping[str, str | None]) -> FailureCause:
    """The cause with its line and fix filled in from what matched and what the caller knows
    (``model``, ``component``, ``better``: the newest installed build that may serve it)."""
    values = {k: v for k, v in {**context, **match.found}.items() if v}
    line_fields = _fields(match.cause.line)
    line = (
        match.cause.line.format(**{k: _shown(values[k]) for k in line_fields})
        if line_fields <= values.keys()
        else re.sub(r" ?'?\{\w+\}'?", "", match.cause.line)
    )
    fix = None
    for template in match.cause.fixes:
        wanted = _fields(template)
        if wanted <= values.keys():
            fix = template.format(**{k: shlex.quote(_shown(values[k])) for k in wanted})
            break
    return FailureCause(code=match.cause.code, line=line, fix=fix)
