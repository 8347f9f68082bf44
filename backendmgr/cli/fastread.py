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
import sys

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

FORMAT = 1
FILE_NAME = "reads.json"
MAX_FILE = 4 << 20  # bytes read from the memo; a larger file is ignored
MAX_OUTPUT = 256 << 10  # a longer output is not stored
MAX_ENTRIES = 48
MAX_WALKED = 20_000  # model files: a bigger tree is not fingerprinted, always the full path
DISABLE_ENV = "BACKENDMGR_NO_FASTREAD"
TRACE_ENV = "BACKENDMGR_FASTREAD_TRACE"  # tests: a file that learns "hit", "miss" or "stored"

# command -> (fewest, most) positional arguments
COMMANDS: dict[str, tuple[int, int]] = {"list": (0, 1), "backends": (0, 0), "models": (0, 0)}
COMMANDS["which"] = (1, 1)
_FLAGS = {"--json": "json", "-q": "quiet", "--quiet": "quiet"}
_VALUED = ("--config", "--home")
# what shapes the output besides the files: rich's terminal handling, the encoding, PATH
_ENV_PREFIXES = ("BACKENDMGR_", "LC_", "TTY_", "XDG_", "PYTHON")
_ENV_NAMES = {"LANG", "TERM", "COLORTERM", "NO_COLOR", "FORCE_COLOR", "CLICOLOR_FORCE", "PATH"}
_ENV_NAMES |= {"COLUMNS", "LINES", "JUPYTER_COLUMNS", "JUPYTER_LINES", "HOME"}


class Request:
    """A read command as typed, reduced to what decides its output."""

    __slots__ = ("args", "command", "config", "home", "json", "quiet")

    def __init__(
        self,
        command: str,
        args: tuple[str, ...],
        json: bool = False,
        quiet: bool = False,
        config: str | None = None,
        home: str | None = None,
    ) -> None:
        self.command, self.args, self.json, self.quiet = command, args, json, quiet
        self.config, self.home = config, home

    def fields(self) -> tuple[object, ...]:
        return (self.command, self.args, self.json, self.quiet, self.config, self.home)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Request) and self.fields() == other.fields()

    def __hash__(self) -> int:
        return hash(self.fields())

    def __repr__(self) -> str:
        return f"Request{self.fields()!r}"


def parse(words: Sequence[str]) -> Request | None:
    """The request, if ``words`` are a plain read command; ``None`` for anything else (other
    commands, ``--debug``, ``--help``, abbreviations, ``--``), which argparse then handles."""
    flags: dict[str, bool] = {"json": False, "quiet": False}
    valued: dict[str, str] = {}
    positional: list[str] = []
    i = 0
    while i < len(words):
        word = words[i]
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


class Spec:
    """What a run read beyond the fixed places: taken from its settings."""

    __slots__ = ("files", "models_dirs")

    def __init__(self, models_dirs: list[str], files: list[str]) -> None:
        self.models_dirs, self.files = models_dirs, files


def _locations(request: Request) -> tuple[str, str]:
    from ..config.locate import where  # the standard library and platformdirs only

    return where(request.config, request.home)


def _sha256(data: bytes = b"") -> Any:
    """The interpreter's built-in SHA-256: hashlib would load OpenSSL for it."""
    try:
        from _sha256 import sha256  # type: ignore[import-not-found]  # Python 3.11
    except ImportError:
        try:
            from _sha2 import sha256  # type: ignore[import-not-found]  # 3.12 and later
        except ImportError:
            from hashlib import sha256
    return sha256(data)


def _key(request: Request, stdout: Any, stderr: Any, config: str) -> str:
    import json

    env = {k: v for k, v in os.environ.items() if k.startswith(_ENV_PREFIXES) or k in _ENV_NAMES}
    env.pop(TRACE_ENV, None)
    streams = []
    for stream in (stdout, stderr):
        tty = _isatty(stream)
        size: tuple[int, int] | None = None
        if tty:
            try:
                size = tuple(os.get_terminal_size(stream.fileno()))  # type: ignore[assignment]
            except (OSError, ValueError, AttributeError):
                size = None
        streams.append([tty, size, getattr(stream, "encoding", None)])
    data = [FORMAT, request.command, request.args, request.json, request.quiet, config]
    data += [sorted(env.items()), streams, os.getcwd(), sys.executable]
    return str(_sha256(json.dumps(data).encode()).hexdigest())


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def _sig(path: str) -> str:
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return "-"
    return f"{st.st_mtime_ns}:{st.st_size}:{st.st_ino}:{st.st_mode}"


def _listing(folder: str) -> list[str]:
    try:
        return sorted(entry.path for entry in os.scandir(folder))
    except OSError:
        return []


def _code_stamp() -> Iterable[str]:
    """backendmgr's own files: an upgraded or edited install never replays an older output."""
    package = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
    for folder, subdirs, files in os.walk(package):
        subdirs[:] = sorted(d for d in subdirs if d != "__pycache__")
        for name in sorted(files):
            if name.endswith((".py", ".yaml")):
                yield _sig(os.path.join(folder, name))


def fingerprint(config: str, home: str, spec: Spec) -> str | None:
    """A digest of every input of a read command; ``None`` when one cannot be taken."""
    import json
    import time

    from ..config.locate import builtin_manifests
    from ..discovery.files import walk_model_files

    digest = _sha256()

    def feed(*parts: object) -> None:
        digest.update(json.dumps(parts, default=str).encode() + b"\n")

    try:
        with open(config, "rb") as fh:
            raw = fh.read(MAX_FILE + 1)
        if len(raw) > MAX_FILE:
            return None
        feed("config", _sha256(raw).hexdigest())
    except FileNotFoundError:
        feed("config", "-")
    except OSError:
        return None
    date = time.strftime("%Y-%m-%d", time.gmtime())  # verify's "today" is a UTC day
    boot = ""
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as boot_file:
            boot = boot_file.read(64).strip()
    except OSError:
        pass
    feed("when", date, boot)
    for name in ("verify.json", "tuned.json", "cache/capabilities.json"):  # results, contexts
        feed(name, _sig(os.path.join(home, name)))
    builds = os.path.join(home, "builds")
    feed("builds", _sig(builds))
    for component in _listing(builds):
        feed(component, _sig(component))
        for build in _listing(component):
            feed(build, _sig(build), _sig(os.path.join(build, ".backendmgr.json")))
    user = os.path.join(os.path.dirname(config), "manifests")
    for manifests in (builtin_manifests(), user):
        names = [(os.path.basename(p), _sig(p)) for p in _listing(manifests)]
        feed(manifests, _sig(manifests), names)
    for path in spec.files:
        feed("file", path, _sig(path))
    for entry in os.environ.get("PATH", "").split(os.pathsep):
        feed("path", entry, _sig(entry) if entry else "")
    walked = 0
    for folder, files in walk_model_files(spec.models_dirs):
        walked += len(files)
        if walked > MAX_WALKED:
            return None
        feed(folder, [(path, st.st_size, st.st_mtime_ns) for _, path, st in files])
    feed("code", list(_code_stamp()))
    return str(digest.hexdigest())


def _memo_path(home: str) -> str:
    return os.path.join(home, "cache", FILE_NAME)


def _load(home: str) -> dict[str, Any]:
    import json

    try:
        with open(_memo_path(home), "rb") as fh:
            raw = fh.read(MAX_FILE + 1)
        if len(raw) > MAX_FILE:
            return {}
        data = json.loads(raw)
    except (OSError, ValueError, RecursionError):
        return {}
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        return {}
    entries = data.get("entries")
    return entries if isinstance(entries, dict) else {}


def _trace(word: str) -> None:
    target = os.environ.get(TRACE_ENV)
    if target:
        try:
            with open(target, "a", encoding="utf-8") as fh:
                fh.write(word + "\n")
        except OSError:
            pass


def _spec_of(entry: dict[str, Any]) -> Spec | None:
    spec = entry.get("spec")
    if not isinstance(spec, dict):
        return None
    dirs, files = spec.get("models_dirs"), spec.get("files")
    if not isinstance(dirs, list) or not isinstance(files, list):
        return None
    if not all(isinstance(v, str) for v in dirs + files):
        return None
    return Spec(models_dirs=dirs, files=files)


def _lookup(key: str, config: str, home: str) -> dict[str, Any] | None:
    """The stored entry for ``key`` when its inputs are unchanged."""
    entry = _load(home).get(key)
    if not isinstance(entry, dict):
        return None
    spec = _spec_of(entry)
    if spec is None or entry.get("fingerprint") != fingerprint(config, home, spec):
        return None
    return entry


def replay(words: Sequence[str], stdout: TextIO, stderr: TextIO) -> int | None:
    """Print a stored output and return its exit status, or ``None`` to take the full path."""
    if os.environ.get(DISABLE_ENV):
        return None
    request = parse(words)
    if request is None:
        return None
    try:
        config, home = _locations(request)
        entry = _lookup(_key(request, stdout, stderr, config), config, home)
        out = entry.get("stdout") if entry else None
        err = entry.get("stderr") if entry else None
        if not isinstance(out, str) or not isinstance(err, str):
            _trace("miss")
            return None
    except Exception:  # a memo that cannot be read is a miss, never a failure
        return None
    _trace("hit")
    stderr.write(err)
    stdout.write(out)
    return 0


def local_ids(
    config_arg: str | None,
    home_arg: str | None,
    kind: str,
    inputs: Callable[[], tuple[Sequence[str], Iterable[str]]],
    compute: Callable[[], list[str]],
) -> list[str]:
    """Ids of ``kind`` (builds, rows, models) for shell completion: stored ones while their
    inputs are unchanged, else ``compute()``, stored for the next <TAB>. ``inputs`` gives the
    settings' model folders and executables, as for :func:`start_recording`."""
    import contextlib

    if os.environ.get(DISABLE_ENV):
        return compute()
    request = Request("__ids", (kind,), config=config_arg, home=home_arg)
    config, home = _locations(request)
    key = _key(request, None, None, config)
    with contextlib.suppress(Exception):
        entry = _lookup(key, config, home)
        found = entry.get("stdout") if entry else None
        if isinstance(found, str):
            _trace("hit")
            return found.split("\n") if found else []
    _trace("miss")
    models_dirs, executables = inputs()
    spec = _spec(models_dirs, executables)
    before = fingerprint(config, home, spec)
    names = compute()
    if before is not None and all("\n" not in name for name in names):
        Recording(key, config, home, spec, before, makes_home=True).store("\n".join(names), "")
    return names


def cached_ids(kinds: Sequence[str]) -> list[str] | None:
    """The ids of ``kinds`` stored by an earlier <TAB> (no ``--config``/``--home`` given), or
    ``None`` when any of them is not stored or its inputs changed."""
    if os.environ.get(DISABLE_ENV):
        return None
    names: list[str] = []
    try:
        for kind in kinds:
            request = Request("__ids", (kind,))
            config, home = _locations(request)
            entry = _lookup(_key(request, None, None, config), config, home)
            found = entry.get("stdout") if entry else None
            if not isinstance(found, str):
                _trace("miss")
                return None
            names += found.split("\n") if found else []
    except Exception:  # a memo that cannot be read is a miss
        return None
    _trace("hit")
    return names


def help_text(words: Sequence[str], stdout: TextIO, compute: Callable[[], str]) -> str:
    """The top level's ``--help``: stored while backendmgr's files and the terminal are the
    same, else ``compute()`` (argparse's own text), stored for next time."""
    if os.environ.get(DISABLE_ENV):
        return compute()
    request = Request("--help", tuple(words))
    try:
        config, home = _locations(request)
        key = _key(request, stdout, None, config)
        entry = _lookup(key, config, home)
        found = entry.get("stdout") if entry else None
        if isinstance(found, str):
            _trace("hit")
            return found
    except Exception:  # a memo that cannot be read is a miss
        return compute()
    _trace("miss")
    spec = Spec(models_dirs=[], files=[])
    before = fingerprint(config, home, spec)
    text = compute()
    if before is not None:
        Recording(key, config, home, spec, before, makes_home=True).store(text, "")
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


class Recording:
    """One full run of a read command, stored when its inputs did not move while it ran."""

    def __init__(
        self,
        key: str,
        config: str,
        home: str,
        spec: Spec,
        before: str,
        streams: tuple[Tee, Tee] | None = None,
        *,
        makes_home: bool = False,
    ) -> None:
        self.key, self.config, self.home, self.spec, self.before = key, config, home, spec, before
        self.streams = streams
        self.makes_home = makes_home  # only <TAB> and --help: a read command never makes it

    def finish(self, code: int) -> None:
        if code == 0 and self.streams is not None:
            self.store(self.streams[0].text(), self.streams[1].text())

    def store(self, out: str, err: str) -> None:
        import contextlib
        import json

        if len(out) + len(err) > MAX_OUTPUT:
            return
        with contextlib.suppress(Exception):  # storing only saves time later
            if fingerprint(self.config, self.home, self.spec) != self.before:
                return
            entries = _load(self.home)
            entries.pop(self.key, None)
            entries[self.key] = {
                "fingerprint": self.before,
                "spec": {"models_dirs": self.spec.models_dirs, "files": self.spec.files},
                "stdout": out,
                "stderr": err,
            }
            while len(entries) > MAX_ENTRIES:  # oldest first: dicts keep insertion order
                entries.pop(next(iter(entries)))
            body = json.dumps({"format": FORMAT, "entries": entries}, ensure_ascii=False)
            from .._fs import atomic_write_bytes

            if not self.makes_home and not os.path.isdir(self.home):
                return
            os.makedirs(os.path.dirname(_memo_path(self.home)), exist_ok=True)
            from pathlib import Path

            atomic_write_bytes(Path(_memo_path(self.home)), body.encode())
            _trace("stored")


def start_recording(
    request: Request,
    stdout: Tee,
    stderr: Tee,
    *,
    models_dirs: Sequence[str],
    executables: Iterable[str],
) -> Recording | None:
    """Take the fingerprint before the full run reads anything (``executables``: every row's
    path and the legacy fallbacks, as the settings name them)."""
    if os.environ.get(DISABLE_ENV):
        return None
    spec = _spec(models_dirs, executables)
    config, home = _locations(request)
    before = fingerprint(config, home, spec)
    if before is None:
        return None
    key = _key(request, stdout, stderr, config)
    return Recording(key, config, home, spec, before, (stdout, stderr))


def inputs_of(settings: Any) -> tuple[list[str], list[str]]:
    """The model folders and every executable the settings name: each row's path and the
    legacy fallbacks a model gets when no row resolves (SPEC §3.2)."""
    exes = [row.path for row in settings.backends]
    exes += [settings.server_exe, settings.sd_server_exe, settings.tts_server_exe]
    return list(settings.models_dirs), [*exes, settings.asr_server_exe]


def _spec(models_dirs: Sequence[str], executables: Iterable[str]) -> Spec:
    import shutil

    files: list[str] = []
    for exe in executables:
        if not exe:
            continue
        found = exe if os.sep in exe else shutil.which(exe)
        if found:
            files.append(os.path.abspath(os.path.expanduser(found)))
    return Spec(models_dirs=list(models_dirs), files=sorted(set(files)))
