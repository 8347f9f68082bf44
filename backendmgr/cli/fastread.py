"""The read commands' output, replayed while nothing they read has changed.

``list``, ``backends``, ``models`` and ``which`` are what people type most, and the full path
(pydantic, the Manager, discovery, rich) costs several times the interpreter's own start-up.
After a full run that succeeded, its exact output is stored under the data home together with a
fingerprint of everything that run could have read: the config file's bytes, the build folders
and receipts, the model files (through discovery's own walk), every executable a row or legacy
fallback names, the verify, tune and probe records, the manifests, ``PATH``, the environment that
shapes output, the date (``verified today``), the boot and backendmgr's own code. The next
identical request recomputes that fingerprint with the standard library alone and, when it
matches, prints the stored output; any difference, or anything unexpected, takes the full path.
So a replay never shows what the full path would not: it is the full path's own output for
the same inputs.

Nothing here imports pydantic, rich, argparse or the Manager.
"""

from __future__ import annotations

import os

from . import memo
from .memo import Request

# Every module a replay imports costs its start-up: no typing, pathlib, dataclasses, datetime
# or OpenSSL here (paths are strings, the digest is the built-in SHA-256). ``parse`` runs for
# every command; the rest imports what it uses when a read command is replayed or stored.
TYPE_CHECKING = False  # typing's own constant costs the import of typing (mypy: always_true)
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence
    from typing import Any, TextIO

__all__ = [
    "Request",
    "Tee",
    "cached_ids",
    "help_text",
    "inputs_of",
    "local_ids",
    "parse",
    "replay",
    "start_recording",
]

COMMANDS: dict[str, tuple[int, int]] = {"list": (0, 1), "backends": (0, 0), "models": (0, 0)}
COMMANDS["which"] = (1, 1)
_FLAGS = {"--json": "json", "-q": "quiet", "--quiet": "quiet"}
_VALUED = ("--config", "--home")


def parse(words: Sequence[str]) -> Request | None:
    """The request, if ``words`` are a plain read command; ``None`` for anything else (other
    commands, ``--debug``, ``--help``, abbreviations, ``--``), which argparse then handles."""
    flags: dict[str, bool] = {"json": False, "quiet": False}
    valued: dict[str, str] = {}
    positional: list[str] = []
    i = 0
    while i < len(words):
        word = words[i]
        if word.startswith("-") and len(positional) > 1:
            return None  # after an operand argparse refuses a global option (SPEC §13)
        if word in _FLAGS:
            flags[_FLAGS[word]] = True
        elif word.split("=", 1)[0] in _VALUED:
            name, eq, value = word.partition("=")
            if not eq:
                i += 1
                if i >= len(words) or words[i].startswith("-"):
                    return None
                value = words[i]
            if not value or name in valued:
                return None
            valued[name] = value
        elif word.startswith("-"):
            return None
        else:
            positional.append(word)
        i += 1
    if not positional or positional[0] not in COMMANDS:
        return None
    fewest, most = COMMANDS[positional[0]]
    if not fewest <= len(positional) - 1 <= most:
        return None
    return Request(
        positional[0],
        tuple(positional[1:]),
        json=flags["json"],
        quiet=flags["quiet"],
        config=valued.get("--config"),
        home=valued.get("--home"),
    )


def replay(words: Sequence[str], stdout: TextIO, stderr: TextIO) -> int | None:
    """Print a stored output and return its exit status, or ``None`` to take the full path."""
    if os.environ.get(memo.DISABLE_ENV):
        return None
    request = parse(words)
    if request is None:
        return None
    try:
        config, home = memo.locations(request)
        entry = memo.lookup(memo.key(request, stdout, stderr, config), config, home)
        out = entry.get("stdout") if entry else None
        err = entry.get("stderr") if entry else None
        if not isinstance(out, str) or not isinstance(err, str):
            memo.trace("miss")
            return None
    except Exception:  # a memo that cannot be read is a miss, never a failure
        return None
    memo.trace("hit")
    stderr.write(err)
    stdout.write(out)
    return 0


def local_ids(
    config_arg: str | None,
    home_arg: str | None,
    kind: str,
    inputs: Callable[[], tuple[Sequence[str], Iterable[str]]] | None,
    compute: Callable[[], list[str]],
) -> list[str]:
    """Ids of ``kind`` (builds, rows, models, components) for shell completion: stored ones
    while their inputs are unchanged, else ``compute()``, stored for the next <TAB>.
    ``inputs`` gives the settings' model folders and executables, as for
    :func:`start_recording`; ``None`` for ids that only the manifests name."""
    import contextlib

    if os.environ.get(memo.DISABLE_ENV):
        return compute()
    request = Request("__ids", (kind,), config=config_arg, home=home_arg)
    config, home = memo.locations(request)
    key = memo.key(request, None, None, config)
    with contextlib.suppress(Exception):
        entry = memo.lookup(key, config, home)
        found = entry.get("stdout") if entry else None
        if isinstance(found, str):
            memo.trace("hit")
            return found.split("\n") if found else []
    memo.trace("miss")
    if inputs is None:
        spec = memo.Spec(models_dirs=[], files=[], state=False)
    else:
        spec = memo.make_spec(*inputs())
    before = memo.fingerprint(config, home, spec)
    names = compute()
    if before is not None and all("\n" not in name for name in names):
        memo.Recording(key, config, home, spec, before, makes_home=True).store("\n".join(names), "")
    return names


def cached_ids(kinds: Sequence[str]) -> list[str] | None:
    """The ids of ``kinds`` stored by an earlier <TAB> (no ``--config``/``--home`` given), or
    ``None`` when any of them is not stored or its inputs changed."""
    if os.environ.get(memo.DISABLE_ENV):
        return None
    names: list[str] = []
    try:
        for kind in kinds:
            request = Request("__ids", (kind,))
            config, home = memo.locations(request)
            entry = memo.lookup(memo.key(request, None, None, config), config, home)
            found = entry.get("stdout") if entry else None
            if not isinstance(found, str):
                memo.trace("miss")
                return None
            names += found.split("\n") if found else []
    except Exception:  # a memo that cannot be read is a miss
        return None
    memo.trace("hit")
    return names


def help_text(words: Sequence[str], stdout: TextIO, compute: Callable[[], str]) -> str:
    """The top level's ``--help``: stored while backendmgr's files and the terminal are the
    same, else ``compute()`` (argparse's own text), stored for next time."""
    if os.environ.get(memo.DISABLE_ENV):
        return compute()
    request = Request("--help", tuple(words))
    try:
        config, home = memo.locations(request)
        key = memo.key(request, stdout, None, config)
        entry = memo.lookup(key, config, home)
        found = entry.get("stdout") if entry else None
        if isinstance(found, str):
            memo.trace("hit")
            return found
    except Exception:  # a memo that cannot be read is a miss
        return compute()
    memo.trace("miss")
    spec = memo.Spec(models_dirs=[], files=[], state=False)  # backendmgr's files alone
    before = memo.fingerprint(config, home, spec)
    text = compute()
    if before is not None:
        memo.Recording(key, config, home, spec, before, makes_home=True).store(text, "")
    return text


class Tee:
    """A text stream that also keeps what was written, for storing a full run's output."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self.parts: list[str] = []

    def write(self, text: str) -> int:
        self.parts.append(text)
        return self._stream.write(text)

    def text(self) -> str:
        return "".join(self.parts)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def start_recording(
    request: Request,
    stdout: Tee,
    stderr: Tee,
    *,
    models_dirs: Sequence[str],
    executables: Iterable[str],
) -> memo.Recording | None:
    """Take the fingerprint before the full run reads anything (``executables``: every row's
    path and the legacy fallbacks, as the settings name them)."""
    if os.environ.get(memo.DISABLE_ENV):
        return None
    spec = memo.make_spec(models_dirs, executables)
    config, home = memo.locations(request)
    before = memo.fingerprint(config, home, spec)
    if before is None:
        return None
    key = memo.key(request, stdout, stderr, config)
    return memo.Recording(key, config, home, spec, before, (stdout, stderr))


def inputs_of(settings: Any) -> tuple[list[str], list[str]]:
    """The model folders and every executable the settings name: each row's path and the
    legacy fallbacks a model gets when no row resolves (SPEC §3.2)."""
    exes = [row.path for row in settings.backends]
    exes += [settings.server_exe, settings.sd_server_exe, settings.tts_server_exe]
    return list(settings.models_dirs), [*exes, settings.asr_server_exe]
