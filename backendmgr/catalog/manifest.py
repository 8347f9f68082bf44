"""Component manifests: the data that says what can be installed and from where (SPEC §5).

Built-in manifests ship in the wheel; user manifests live in ``<config dir>/manifests``. A
manifest is data only: matching and detection read it, nothing here touches the network.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import field
from pathlib import Path
from typing import Annotated, Any, Literal

from ..errors import ConfigError, validation_problem
from ..immutable import frozen
from ..record import After, Invalid, Length, Limit, Record, Tagged, load, plain, validate
from .files import ManifestText, builtin_manifest_dir, manifest_files

__all__ = [
    "Catalog",
    "GithubSource",
    "Manifest",
    "PypiSource",
    "Variant",
    "builtin_manifest_dir",
    "load_catalog",
    "parse_manifest",
    "pypi_variants_install_anywhere",
    "source_label",
]

PLATFORMS = (
    "linux-x64",
    "linux-arm64",
    "windows-x64",
    "windows-arm64",
    "darwin-arm64",
    "darwin-x64",
)
_REPO = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")


def _check_patterns(value: dict[str, list[str]]) -> dict[str, list[str]]:
    for platform, patterns in value.items():
        if platform not in PLATFORMS:
            raise ValueError(
                f"unknown platform {platform!r}; expected one of {', '.join(PLATFORMS)}"
            )
        for pattern in patterns:
            try:
                re.compile(pattern.replace("{v}", "x"))
            except re.error as exc:
                raise ValueError(f"bad pattern {pattern!r}: {exc}") from exc
    return value


def _repo_shape(value: str) -> str:
    owner, _, name = value.partition("/")
    if not _REPO.match(value) or owner in (".", "..") or name in (".", ".."):
        raise ValueError(f"repo must look like owner/name, got {value!r}")
    return value


@frozen(kw_only=True)
class GithubSource(Record):
    type: Literal["github"]
    repo: Annotated[str, After(_repo_shape)]


@frozen(kw_only=True)
class PypiSource(Record):
    type: Literal["pypi"]
    package: str
    index_url: str | None = None


Source = Annotated[GithubSource | PypiSource, Tagged("type")]


def source_label(source: Any) -> str:
    """``github:OWNER/REPO`` or ``pypi:PACKAGE``: a manifest's or a lock file's source (the two
    share this shape) as receipts, ``catalog`` and ``sync`` name it."""
    if source.type == "github":
        return f"github:{source.repo}"
    return f"pypi:{source.package}"


Patterns = Annotated[dict[str, list[str]], After(_check_patterns)]


@frozen(kw_only=True)
class Variant(Record):
    id: str
    label: str = ""
    assets: Patterns = field(default_factory=dict)
    extras: Patterns = field(default_factory=dict)
    pair_key: str | None = None
    toolkit_key: str | None = None
    platforms: list[str] = field(default_factory=list)
    pip_args: list[str] = field(default_factory=list)
    torch_backend: Annotated[str | None, Limit(pattern=r"^[a-z0-9.]+$")] = None
    """A pypi variant's torch build (``cpu``, ``auto``): uv's ``--torch-backend``, or the
    user's torch index (``torch_index_url``) when one is set."""

    def available_on(self, platform: str) -> bool:
        return bool(self.assets.get(platform)) or platform in self.platforms


def pypi_variants_install_anywhere(data: Any) -> Any:
    """A ``pypi`` variant with no asset patterns and no platform list (SPEC §5 names only
    ``id`` and ``label``) is a pip install, which pip itself matches to the platform: applied
    to what a person wrote before it is validated (:func:`parse_manifest`)."""
    if not isinstance(data, dict):
        return data
    source, variants = data.get("source"), data.get("variants")
    if not (isinstance(source, dict) and source.get("type") == "pypi"):
        return data
    if not isinstance(variants, list):
        return data
    filled = [
        {**v, "platforms": list(PLATFORMS)}
        if isinstance(v, dict) and not v.get("assets") and not v.get("platforms")
        else v
        for v in variants
    ]
    return {**data, "variants": filled}


@frozen(kw_only=True)
class Manifest(Record):
    id: Annotated[str, Limit(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")]
    name: str = ""
    kind: str = ""
    source: Source
    exe: dict[Literal["linux", "windows", "darwin", "default"], str]
    bare: bool = False
    allow_prerelease: bool = False
    checksums: str | None = None
    ignore_case: bool = False
    python: str | None = None
    version_args: list[str] = field(default_factory=lambda: ["--version"])
    variants: Annotated[list[Variant], Length(min=1)]

    def exe_for(self, os_name: str) -> str:
        """The executable inside a build, relative to its folder. In a package-index build
        (a virtual environment) a bare name is a console script: ``bin/NAME``, or
        ``Scripts/NAME.exe`` on Windows; a path such as ``bin/vllm`` stays as written."""
        name: str = self.exe.get(os_name) or self.exe.get("default") or self.id  # type: ignore[call-overload]
        if isinstance(self.source, PypiSource) and "/" not in name and "\\" not in name:
            if os_name == "windows":
                return f"Scripts/{name.removesuffix('.exe')}.exe"
            return f"bin/{name}"
        return name

    def variant(self, variant_id: str) -> Variant | None:
        return next((v for v in self.variants if v.id == variant_id), None)

    def variants_on(self, platform: str) -> list[Variant]:
        return [v for v in self.variants if v.available_on(platform)]


class Catalog:
    """Every known component, built-ins first, in a stable order.

    The user's manifests are given read; a built-in one (``builtin``: its id, which names its
    file, and the file) is read when it is first asked for, so an install reads its own
    manifest and the user's, not all six."""

    def __init__(
        self,
        manifests: Iterable[Manifest] = (),
        *,
        builtin: Mapping[str, Path] | None = None,
        cache: Path | None = None,
    ) -> None:
        self._builtin: dict[str, Manifest | Path] = dict(builtin or {})
        self._user = {manifest.id: manifest for manifest in manifests}
        self._cache = cache

    def _read(self, component: str) -> Manifest:
        found = self._builtin[component]
        if isinstance(found, Manifest):
            return found
        manifest = _load_file(found, self._cache)
        if manifest.id != component:  # a packaging mistake: the id is the file's name
            raise ConfigError(f'manifest {found}: its id is "{manifest.id}", not its name')
        self._builtin[component] = manifest
        return manifest

    def __iter__(self) -> Iterator[Manifest]:
        for component in list(self._builtin):
            yield self._read(component)
        yield from self._user.values()

    def __contains__(self, component: object) -> bool:
        return component in self._builtin or component in self._user

    def ids(self) -> list[str]:
        return [*self._builtin, *self._user]

    def get(self, component: str) -> Manifest | None:
        if component in self._builtin:
            return self._read(component)
        return self._user.get(component)


def parse_manifest(data: Any, source: str) -> Manifest:
    """What a person wrote (a manifest's parsed YAML) as a :class:`Manifest`, validated;
    a problem is one :class:`ConfigError` naming ``source`` and the field.

    The strict reader (:func:`~backendmgr.record.load`) tries first: what it accepts, pydantic
    accepts as the same manifest (it converts only an int to a float, as pydantic does, and
    runs the same checks), and it costs no pydantic import nor schema (0.1 s of an install's
    start-up in a fresh home). Anything it refuses goes to pydantic, for its lax reading and
    its error message."""
    data = pypi_variants_install_anywhere(data)
    with contextlib.suppress(Invalid):
        return load(Manifest, data, source)
    try:
        return validate(Manifest, data)
    except ValueError as exc:
        from pydantic import ValidationError  # loaded by validate

        if not isinstance(exc, ValidationError):
            raise
        problem = validation_problem(exc)
        name = problem.field or "(top level)"
        raise ConfigError(f"{source}: field {name}: {problem.message}") from exc


def _load_file(path: Path, cache: Path | None) -> Manifest:
    """The manifest at ``path``: its validated form kept below ``cache`` for exactly its
    bytes (read back strictly, without pydantic), else its YAML parsed, validated and kept."""
    text = ManifestText.read(path, cache)
    kept = text.kept()
    if kept is not None:
        with contextlib.suppress(Invalid):  # not what we keep: validated again from the YAML
            return load(Manifest, kept, f"manifest {path}")
    manifest = parse_manifest(text.parse(), f"manifest {path}")
    text.keep(plain(manifest))
    return manifest


def load_catalog(
    user_dir: Path | None = None, builtin_dir: Path | None = None, cache: Path | None = None
) -> Catalog:
    """Built-in manifests, then the user's; a user manifest may not reuse a known id.
    ``cache``: the data home's cache folder, where each manifest's parse is kept. The user's
    manifests are read now (a mistake in one is reported by any command that needs the
    catalog), a built-in one when it is first asked for (:class:`Catalog`)."""
    builtin = builtin_dir or builtin_manifest_dir()
    known: dict[str, Path] = {}
    seen: dict[str, Path] = {}
    manifests: list[Manifest] = []
    for path in manifest_files(user_dir, builtin):
        if path.parent == builtin:
            known.setdefault(path.stem, path)
            continue
        manifest = _load_file(path, cache)
        prior = known.get(manifest.id) or seen.get(manifest.id)
        if prior is not None:
            raise ConfigError(
                f'manifest {path}: component id "{manifest.id}" is already defined by '
                f"{prior}; pick another id"
            )
        seen[manifest.id] = path
        manifests.append(manifest)
    return Catalog(manifests, builtin=known, cache=cache)
