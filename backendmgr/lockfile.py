"""``backendmgr.lock``: the exact builds of one machine, so that every machine of a fleet can
install the same bytes (``backendmgr lock`` writes it, ``backendmgr sync`` applies it).

YAML, not TOML: the standard library only reads TOML, while ruamel.yaml (already a
dependency) both writes it through a real emitter and reads it through the bounded loader
every user YAML file goes through (:func:`backendmgr._yaml.load_yaml`). The file is sorted,
one entry per build, with no timestamps, so that two locks of the same builds are the same
bytes and a change shows as a small diff. The lock is hostile input like any file a person
can edit: every field is checked by pydantic (unknown keys refused) before it is used.
"""

from __future__ import annotations

import io
import re
from dataclasses import field
from pathlib import Path
from typing import Annotated, Any, Literal

from packaging.utils import canonicalize_name

from ._fs import atomic_write_bytes, read_regular
from ._yaml import load_yaml, read_limited
from .errors import ConfigError, validation_problem
from .immutable import frozen
from .install.store import InstalledEntry
from .record import After, Length, Limit, Record, Tagged, plain, validate
from .registry.rows import build_row_id

__all__ = [
    "LOCK_FORMAT",
    "LOCK_NAME",
    "LockFile",
    "LockedAsset",
    "LockedBuild",
    "dump_lock",
    "lock_from_entries",
    "locked_entry",
    "parse_lock",
    "read_lock",
    "same_build",
    "write_lock",
]

LOCK_NAME = "backendmgr.lock"
LOCK_FORMAT: Literal[1] = 1
MAX_LOCK_BYTES = 4 << 20
"""A lock of a few hundred builds is well under this."""

_HEADER = (
    'backendmgr.lock: the exact builds to install, written by "backendmgr lock".\n'
    'Commit it, then run "backendmgr sync" on every machine. Do not edit by hand.\n'
)
_SEGMENT = r"[^/\\\x00-\x1f\x7f.][^/\\\x00-\x1f\x7f]{0,199}"
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_REPO = re.compile(r"^[A-Za-z0-9_-][A-Za-z0-9_.-]{0,99}/[A-Za-z0-9_-][A-Za-z0-9_.-]{0,99}$")


def _segment(value: str) -> str:
    if not re.fullmatch(_SEGMENT, value):
        raise ValueError(
            f"{value[:80]!r} cannot be a file or folder name (no /, \\, control characters, "
            "leading dot, over 200 characters)"
        )
    return value


def _matching(pattern: re.Pattern[str], shape: str) -> After:
    """A field that must match ``pattern``; refused as ``shape, got '…'``."""

    def check(value: str) -> str:
        if not pattern.match(value):
            raise ValueError(f"{shape}, got {value[:80]!r}")
        return value

    return After(check)


Segment = Annotated[str, After(_segment)]
"""A name that becomes one path segment (an asset file, a tag folder): never ``..`` or ``/``."""
Text = Annotated[str, Length(min=1, max=400)]


@frozen(kw_only=True)
class GithubLock(Record):
    type: Literal["github"]
    repo: Annotated[str, _matching(_REPO, "repo must look like owner/name")]
    tag: Segment


@frozen(kw_only=True)
class PypiLock(Record):
    type: Literal["pypi"]
    package: Text
    index_url: Text | None = None
    pip_args: Annotated[list[Text], Length(max=64)] = field(default_factory=list)


@frozen(kw_only=True)
class LockedAsset(Record):
    name: Segment
    url: Annotated[str, Limit(pattern=r"^https?://"), Length(max=2000)]
    size: Annotated[int, Limit(ge=0)]
    sha256: Annotated[str, _matching(_SHA256, "sha256 must be 64 lowercase hex digits")]


@frozen(kw_only=True)
class LockedBuild(Record):
    id: Text
    component: Segment
    version: Segment
    variant: Segment
    source: Annotated[GithubLock | PypiLock, Tagged("type")]
    assets: Annotated[list[LockedAsset], Length(max=64)] = field(default_factory=list)
    python: Annotated[str | None, Limit(pattern=r"^\d+\.\d+(\.\d+)?\S{0,20}$")] = None
    packages: Annotated[list[Text] | None, Length(max=5000)] = None

    def rule(self) -> str | None:
        expected = build_row_id(self.component, self.version, self.variant)
        if self.id != expected:
            return f"id {self.id[:80]!r} does not match its fields ({expected})"
        if isinstance(self.source, GithubLock):
            if self.source.tag != self.version:
                return f"{self.id}: source tag {self.source.tag!r} is not its version"
            if not self.assets:
                return f"{self.id}: an archive build lists its assets"
            if self.packages is not None or self.python is not None:
                return f"{self.id}: an archive build has no python or packages"
            names = [a.name for a in self.assets]
            if len(set(names)) != len(names):
                return f"{self.id}: an asset is listed twice"
            return None
        if self.assets:
            return f"{self.id}: a venv build has no assets"
        if self.packages is None:
            return f"{self.id}: a venv build lists its packages"
        try:
            self.pins()  # every entry must be name==version
        except ValueError as exc:
            return str(exc)
        return None

    def pins(self) -> dict[str, str]:
        """``packages`` as {name: version}; every entry must be an exact ``name==version``."""
        out: dict[str, str] = {}
        for item in self.packages or []:
            name, sep, version = item.partition("==")
            if not sep or not name.strip() or not version.strip() or "=" in version:
                raise ValueError(f"{self.id}: package {item[:80]!r} is not name==version")
            key = canonicalize_name(name.strip())
            if key in out:
                raise ValueError(f"{self.id}: package {name.strip()!r} is listed twice")
            out[key] = version.strip()
        return out


@frozen(kw_only=True)
class LockFile(Record):
    format: Literal[1]
    activated: Annotated[dict[Segment, Text], Length(max=1000)] = field(default_factory=dict)
    builds: Annotated[list[LockedBuild], Length(max=5000)] = field(default_factory=list)

    def rule(self) -> str | None:
        ids = [b.id for b in self.builds]
        if len(set(ids)) != len(ids):
            return "a build is listed twice"
        by_id = {b.id: b for b in self.builds}
        for component, build_id in self.activated.items():
            build = by_id.get(build_id)
            if build is None or build.component != component:
                return f"activated build {build_id[:80]!r} of {component} is not among the builds"
        return None

    def build(self, build_id: str) -> LockedBuild | None:
        return next((b for b in self.builds if b.id == build_id), None)


# --- from the build store ------------------------------------------------------------------


def locked_entry(entry: InstalledEntry, pypi: PypiLock | None = None) -> LockedBuild:
    """What the lock says about one installed build (its receipt, and for a venv build the
    index settings its manifest names)."""
    r = entry.receipt
    kind, _, name = r.source.partition(":")
    if kind == "github":
        return LockedBuild(
            id=entry.id,
            component=r.component,
            version=r.version,
            variant=r.variant,
            source=GithubLock(type="github", repo=name, tag=r.version),
            assets=[
                LockedAsset(name=a.name, url=a.url, size=a.size, sha256=a.sha256)
                for a in sorted(r.assets, key=lambda a: a.name)
            ],
        )
    return LockedBuild(
        id=entry.id,
        component=r.component,
        version=r.version,
        variant=r.variant,
        source=pypi or PypiLock(type="pypi", package=name),
        python=r.python,
        packages=[f"{k}=={v}" for k, v in sorted((r.packages or {}).items())],
    )


def lock_from_entries(builds: list[LockedBuild], activated: dict[str, str]) -> LockFile:
    """A lock in its one canonical order: builds by id, activated by component."""
    return LockFile(
        format=LOCK_FORMAT,
        activated=dict(sorted(activated.items())),
        builds=sorted(builds, key=lambda b: b.id),
    )


def same_build(locked: LockedBuild, entry: InstalledEntry) -> bool:
    """Whether an installed build is the locked one, byte for byte (URLs may differ: a mirror
    serves the same bytes from elsewhere)."""
    r = entry.receipt
    if isinstance(locked.source, GithubLock):
        have = sorted((a.name, a.sha256) for a in r.assets)
        return have == sorted((a.name, a.sha256) for a in locked.assets)
    have_pins = {canonicalize_name(k): v for k, v in (r.packages or {}).items()}
    return have_pins == locked.pins()


# --- text ----------------------------------------------------------------------------------


def dump_lock(lock: LockFile) -> str:
    """The lock as YAML, through ruamel's emitter (which quotes whatever needs quoting)."""
    from ruamel.yaml import YAML
    from ruamel.yaml.comments import CommentedMap

    doc = CommentedMap(plain(lock, drop_none=True))
    for build in doc["builds"]:
        if not build.get("assets"):
            build.pop("assets", None)
    doc.yaml_set_start_comment(_HEADER)
    yaml = YAML()
    yaml.indent(mapping=2, sequence=4, offset=2)
    yaml.width = 1 << 16
    out = io.StringIO()
    yaml.dump(doc, out)
    return out.getvalue()


def parse_lock(text: str, source: str) -> LockFile:
    """A lock from its text; every problem is one :class:`ConfigError` naming ``source``."""
    data: Any = load_yaml(text, source)
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: not a backendmgr lock (expected a mapping at the top)")
    if data.get("format") != LOCK_FORMAT:
        shown = repr(data.get("format"))[:40]
        raise ConfigError(
            f"{source}: lock format {shown} is not {LOCK_FORMAT}; write it again with "
            '"backendmgr lock" (or upgrade backendmgr)'
        )
    try:
        return validate(LockFile, data)
    except ValueError as exc:
        from pydantic import ValidationError  # loaded by validate

        if not isinstance(exc, ValidationError):
            raise
        problem = validation_problem(exc)
        said = "unknown key" if problem.kind == "extra_forbidden" else problem.message
        raise ConfigError(f"{source}: {problem.field or '(top level)'}: {said}") from exc


def read_lock(path: Path) -> LockFile:
    try:
        data = read_limited(path, MAX_LOCK_BYTES)
    except FileNotFoundError:
        raise ConfigError(
            f'{path} does not exist; write it with "backendmgr lock" on a machine that has '
            "the builds"
        ) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text; this is not a backendmgr lock") from None
    return parse_lock(text, str(path))


def write_lock(path: Path, lock: LockFile) -> bool:
    """Write ``lock`` atomically; False (and nothing written) when the file already says it."""
    data = dump_lock(lock).encode()
    try:  # a FIFO in its place is not waited on (the write then refuses it)
        if read_regular(path, len(data)) == data:
            return False
    except OSError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, data)
    return True
