"""The read memo behind :mod:`.fastread`: where a read's output is stored, under which key,
and the fingerprint of everything that output depends on. Standard library only, and only its
cheapest modules (see :mod:`.fastread` for why)."""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # typing's own constant costs the import of typing (mypy: always_true)
if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence
    from pathlib import Path
    from typing import Any

    from .fastread import Tee

__all__ = [
    "DISABLE_ENV",
    "MAX_OUTPUT",
    "TRACE_ENV",
    "Recording",
    "Request",
    "Spec",
    "fingerprint",
    "key",
    "locations",
    "lookup",
    "make_spec",
    "trace",
]


FORMAT = 1


FOLDER = "reads"  # <home>/cache/reads/<key>.json


MAX_FILE = 4 << 20  # bytes read from the memo; a larger file is ignored


MAX_OUTPUT = 256 << 10  # a longer output is not stored


MAX_ENTRIES = 48


MAX_WALKED = 20_000  # model files: a bigger tree is not fingerprinted, always the full path


DISABLE_ENV = "BACKENDMGR_NO_FASTREAD"


TRACE_ENV = "BACKENDMGR_FASTREAD_TRACE"  # tests: a file that learns "hit", "miss" or "stored"

# command -> (fewest, most) positional arguments


# what shapes the output besides the files: rich's terminal handling, the encoding, PATH
ENV_PREFIXES = ("BACKENDMGR_", "LC_", "TTY_", "XDG_", "PYTHON")
ENV_NAMES = {"LANG", "TERM", "COLORTERM", "NO_COLOR", "FORCE_COLOR", "CLICOLOR_FORCE", "PATH"}
ENV_NAMES |= {"COLUMNS", "LINES", "JUPYTER_COLUMNS", "JUPYTER_LINES", "HOME"}


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


class Spec:
    """What a run read beyond the fixed places: taken from its settings. ``state=False``: the
    output depends on backendmgr's own files and the manifests alone (``--help``, component
    ids), so the config, builds, models and ``PATH`` are not looked at."""

    __slots__ = ("files", "models_dirs", "state")

    def __init__(self, models_dirs: list[str], files: list[str], state: bool = True) -> None:
        self.models_dirs, self.files, self.state = models_dirs, files, state

    def as_json(self) -> dict[str, Any]:
        return {"models_dirs": self.models_dirs, "files": self.files, "state": self.state}

    def ident(self) -> tuple[object, ...]:
        return (tuple(self.models_dirs), tuple(self.files), self.state)


def locations(request: Request) -> tuple[str, str]:
    from ..config.locate import where  # the standard library and platformdirs only

    return where(request.config, request.home)


def sha256(data: bytes = b"") -> Any:
    """The interpreter's built-in SHA-256: hashlib would load OpenSSL for it."""
    try:
        from sha256 import sha256  # type: ignore[import-not-found]  # Python 3.11
    except ImportError:
        try:
            from _sha2 import sha256  # type: ignore[import-not-found]  # 3.12 and later
        except ImportError:
            from hashlib import sha256
    return sha256(data)


def key(request: Request, stdout: Any, stderr: Any, config: str) -> str:
    import json

    env = {k: v for k, v in os.environ.items() if k.startswith(ENV_PREFIXES) or k in ENV_NAMES}
    env.pop(TRACE_ENV, None)
    streams = []
    for stream in (stdout, stderr):
        tty = isatty(stream)
        size: tuple[int, int] | None = None
        if tty:
            try:
                size = tuple(os.get_terminal_size(stream.fileno()))  # type: ignore[assignment]
            except (OSError, ValueError, AttributeError):
                size = None
        streams.append([tty, size, getattr(stream, "encoding", None)])
    data = [FORMAT, request.command, request.args, request.json, request.quiet, config]
    data += [sorted(env.items()), streams, os.getcwd(), sys.executable]
    return str(sha256(json.dumps(data).encode()).hexdigest())


def isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def sig(path: str) -> str:
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return "-"
    return f"{st.st_mtime_ns}:{st.st_size}:{st.st_ino}:{st.st_mode}"


def listing(folder: str) -> list[str]:
    try:
        return sorted(entry.path for entry in os.scandir(folder))
    except OSError:
        return []


def code_stamp() -> Iterable[str]:
    """backendmgr's own files: an upgraded or edited install never replays an older output."""
    package = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
    for folder, subdirs, files in os.walk(package):
        subdirs[:] = sorted(d for d in subdirs if d != "__pycache__")
        for name in sorted(files):
            if name.endswith((".py", ".yaml")):
                yield sig(os.path.join(folder, name))


def fingerprint(config: str, home: str, spec: Spec) -> str | None:
    """A digest of every input of a read command; ``None`` when one cannot be taken."""
    import json
    import time

    from ..config.locate import builtin_manifests
    from ..discovery.files import walk_model_files

    digest = sha256()

    def feed(*parts: object) -> None:
        digest.update(json.dumps(parts, default=str).encode() + b"\n")

    user = os.path.join(os.path.dirname(config), "manifests")
    for manifests in (builtin_manifests(), user):
        names = [(os.path.basename(p), sig(p)) for p in listing(manifests)]
        feed(manifests, sig(manifests), names)
    feed("code", list(code_stamp()))
    if not spec.state:
        return str(digest.hexdigest())
    try:
        with open(config, "rb") as fh:
            raw = fh.read(MAX_FILE + 1)
        if len(raw) > MAX_FILE:
            return None
        feed("config", sha256(raw).hexdigest())
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
        feed(name, sig(os.path.join(home, name)))
    builds = os.path.join(home, "builds")
    feed("builds", sig(builds))
    for component in listing(builds):
        feed(component, sig(component))
        for build in listing(component):
            feed(build, sig(build), sig(os.path.join(build, ".backendmgr.json")))
    for path in spec.files:
        feed("file", path, sig(path))
    for entry in os.environ.get("PATH", "").split(os.pathsep):
        feed("path", entry, sig(entry) if entry else "")
    walked = 0
    for folder, files in walk_model_files(spec.models_dirs):
        walked += len(files)
        if walked > MAX_WALKED:
            return None
        feed(folder, [(path, st.st_size, st.st_mtime_ns) for _, path, st in files])
    return str(digest.hexdigest())


def memo_dir(home: str) -> str:
    return os.path.join(home, "cache", FOLDER)


def load(home: str, key: str) -> dict[str, Any] | None:
    """One stored entry: a file per key, so a replay reads only its own output."""
    import json

    try:
        with open(os.path.join(memo_dir(home), key + ".json"), "rb") as fh:
            raw = fh.read(MAX_FILE + 1)
        if len(raw) > MAX_FILE:
            return None
        data = json.loads(raw)
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        return None
    return data


def trace(word: str) -> None:
    target = os.environ.get(TRACE_ENV)
    if target:
        try:
            with open(target, "a", encoding="utf-8") as fh:
                fh.write(word + "\n")
        except OSError:
            pass


def spec_of(entry: dict[str, Any]) -> Spec | None:
    spec = entry.get("spec")
    if not isinstance(spec, dict):
        return None
    dirs, files, state = spec.get("models_dirs"), spec.get("files"), spec.get("state")
    if not isinstance(dirs, list) or not isinstance(files, list) or not isinstance(state, bool):
        return None
    if not all(isinstance(v, str) for v in dirs + files):
        return None
    return Spec(models_dirs=dirs, files=files, state=state)


_TAKEN: dict[tuple[object, ...], str | None] = {}  # fingerprints taken by this process


def lookup(key: str, config: str, home: str) -> dict[str, Any] | None:
    """The stored entry for ``key`` when its inputs are unchanged. Several look-ups in one run
    (the ids of ``which <TAB>``) share a fingerprint of the same inputs."""
    entry = load(home, key)
    spec = spec_of(entry) if entry is not None else None
    if entry is None or spec is None:
        return None
    taken = (config, home, *spec.ident())
    if taken not in _TAKEN:
        _TAKEN[taken] = fingerprint(config, home, spec)
    return entry if entry.get("fingerprint") == _TAKEN[taken] else None


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
            if not self.makes_home and not os.path.isdir(self.home):
                return
            entry = {
                "format": FORMAT,
                "fingerprint": self.before,
                "spec": self.spec.as_json(),
                "stdout": out,
                "stderr": err,
            }
            from pathlib import Path

            from .._fs import atomic_write_bytes

            folder = Path(memo_dir(self.home))
            folder.mkdir(parents=True, exist_ok=True)
            body = json.dumps(entry, ensure_ascii=False).encode()
            atomic_write_bytes(folder / f"{self.key}.json", body)
            _forget_oldest(folder)
            trace("stored")


def _forget_oldest(folder: Path) -> None:
    """At most ``MAX_ENTRIES`` stored outputs: the least recently stored go."""
    kept = sorted(folder.glob("*.json"), key=lambda p: p.stat().st_mtime_ns, reverse=True)
    for stale in kept[MAX_ENTRIES:]:
        stale.unlink(missing_ok=True)


def make_spec(models_dirs: Sequence[str], executables: Iterable[str]) -> Spec:
    import shutil

    files: list[str] = []
    for exe in executables:
        if not exe:
            continue
        found = exe if os.sep in exe else shutil.which(exe)
        if found:
            files.append(os.path.abspath(os.path.expanduser(found)))
    return Spec(models_dirs=list(models_dirs), files=sorted(set(files)))
