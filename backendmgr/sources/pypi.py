"""Versions of a Python package (SPEC §6, PyPI source), from wherever pip would look.

``PIP_NO_INDEX`` + ``PIP_FIND_LINKS``: the local folders' file names, and each wheel's own
``Requires-Python`` from its METADATA. An index (the manifest's ``index_url``, else
``PIP_INDEX_URL``, else pip's own default, whose address is read from pip so that it is written
nowhere here): its PEP 691 JSON page, which also gives each file's ``requires-python`` and
upload time (a PEP 503 HTML page, as many mirrors serve, gives versions and
``data-requires-python``). Only when pip cannot say its default is pip itself asked
(``pip index versions``: versions only).

The index is read through the shared network client (``net``: timeouts, proxy settings, the
redirect checks and the error map), so a stalled or garbled index is one line, as GitHub is.
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from collections.abc import Mapping
from datetime import datetime
from email.parser import HeaderParser
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import anyio
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import InvalidVersion, Version

from ..errors import NetworkError, NotFound
from ..immutable import frozen
from ..net import NetSettings, get_bounded, make_client
from .models import tag_problem

__all__ = [
    "IndexRelease",
    "configured_index",
    "default_index",
    "package_releases",
    "package_versions",
]

PEP691 = "application/vnd.pypi.simple.v1+json"
PIP_TIMEOUT_S = 120
MAX_INDEX_BYTES = 32 << 20  # a project page with every file of a large project is a few MiB
MAX_METADATA_BYTES = 1 << 20  # a wheel's METADATA (its long description included)


@frozen(slots=True)
class IndexRelease:
    """One version of a package as the index (or a find-links folder) describes it."""

    version: Version
    requires_python: str | None = None
    """The ``Requires-Python`` its files declare (None: none declared, or not known)."""
    uploaded: datetime | None = None
    """When its first file was uploaded (PEP 700 ``upload-time``); None where not published."""

    def merged(self, other: IndexRelease) -> IndexRelease:
        """What two places say about one version: each field from whichever knows it."""
        return IndexRelease(
            self.version,
            self.requires_python or other.requires_python,
            min((t for t in (self.uploaded, other.uploaded) if t is not None), default=None),
        )


def _version_of(filename: str, package: str) -> Version | None:
    try:
        if filename.endswith(".whl"):
            name, version, _, _ = parse_wheel_filename(filename)
        elif filename.endswith((".tar.gz", ".zip")):
            name, version = parse_sdist_filename(filename)
        else:
            return None
    except (InvalidWheelFilename, InvalidSdistFilename, InvalidVersion):
        return None
    return version if name == canonicalize_name(package) else None


def _wheel_requires_python(path: Path) -> str | None:
    """A wheel's METADATA ``Requires-Python`` (read bounded); None if absent or unreadable."""
    try:
        with zipfile.ZipFile(path) as zf:
            names = [n for n in zf.namelist() if n.count("/") == 1]
            meta = next((n for n in names if n.endswith(".dist-info/METADATA")), None)
            if meta is None or zf.getinfo(meta).file_size > MAX_METADATA_BYTES:
                return None
            text = zf.read(meta).decode("utf-8", "replace")
    except (OSError, zipfile.BadZipFile, KeyError, ValueError):
        return None
    return _requires_python(HeaderParser().parsestr(text).get("Requires-Python"))


def _find_links(env: Mapping[str, str], package: str) -> dict[Version, IndexRelease]:
    found: dict[Version, IndexRelease] = {}
    for entry in env.get("PIP_FIND_LINKS", "").split():
        path = Path(unquote(urlsplit(entry).path)) if entry.startswith("file:") else Path(entry)
        if path.is_dir():
            for file in sorted(path.iterdir()):
                version = _version_of(file.name, package)
                if version is None:
                    continue
                wants = _wheel_requires_python(file) if file.name.endswith(".whl") else None
                release = IndexRelease(version, wants)
                found[version] = found[version].merged(release) if version in found else release
    return found


MAX_REQUIRES_PYTHON = 200


def _requires_python(value: object) -> str | None:
    """A ``Requires-Python`` as the index or a wheel states it, kept only when it is a valid
    specifier of sane length (normalised: no stray text reaches a message), else None."""
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_REQUIRES_PYTHON:
        return None
    try:
        return str(SpecifierSet(value.strip())) or None
    except InvalidSpecifier:
        return None


def _upload_time(value: object) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


async def _from_index(
    index_url: str, package: str, net: NetSettings
) -> dict[Version, IndexRelease]:
    url = f"{index_url.rstrip('/')}/{canonicalize_name(package)}/"
    where = f"the package index {index_url}"
    try:
        async with make_client(net) as client:
            response = await get_bounded(
                client,
                net,
                url,
                {"Accept": f"{PEP691}, text/html;q=0.1"},
                max_bytes=MAX_INDEX_BYTES,
                what="the index",
                token=False,  # the GitHub token is never sent to an index
            )
    except NetworkError as exc:
        raise NetworkError(f"cannot reach {where} ({exc})") from exc
    if response.status_code == 404:
        raise NotFound(f"{where} has no package {package}")
    kind = response.headers.get("content-type", "")
    if response.status_code == 200 and PEP691 not in kind and "text/html" in kind:
        return _from_html(response.content, package)  # a PEP 503 mirror (pip reads it too)
    if response.status_code != 200 or PEP691 not in kind:
        raise NetworkError(
            f"{where} answered HTTP {response.status_code} without PEP 691 JSON for {package}"
        )
    try:
        page: Any = response.json()
    except (ValueError, RecursionError):
        raise NetworkError(f"{where} sent invalid JSON for {package}") from None
    files = page.get("files") if isinstance(page, dict) else None
    if not isinstance(files, list):
        raise NetworkError(f"{where} sent a page without a list of files for {package}")
    found: dict[Version, IndexRelease] = {}
    for file in files:
        if not isinstance(file, dict) or file.get("yanked"):
            continue
        version = _version_of(str(file.get("filename", "")), package)
        if version is None:
            continue
        release = IndexRelease(
            version,
            _requires_python(file.get("requires-python")),
            _upload_time(file.get("upload-time")),
        )
        found[version] = found[version].merged(release) if version in found else release
    return found


def _run_pip(package: str, env: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "index",
            "versions",
            "--pre",
            "--disable-pip-version-check",
            package,
        ],
        capture_output=True,
        text=True,
        env=dict(env),
        timeout=PIP_TIMEOUT_S,
        check=False,
    )


def configured_index() -> str | None:
    """The ``index-url`` pip's own configuration files set (``pip.conf``), which uv does not
    read: passed to it as ``--index-url`` so both install from the user's mirror."""
    try:
        from pip._internal.configuration import Configuration

        config = Configuration(isolated=False)
        config.load()
    except Exception:
        return None
    for key in ("install.index-url", "global.index-url"):
        try:
            value = config.get_value(key)
        except Exception:
            continue
        if isinstance(value, str) and value.split():
            return value.split()[0]
    return None


def default_index(env: Mapping[str, str]) -> str | None:
    """The index pip would use when ``PIP_INDEX_URL`` is unset: its configuration's, else its
    built-in default as pip itself names it (this program writes no registry's address); None
    when pip cannot be imported."""
    del env  # PIP_INDEX_URL is read before this is asked
    configured = configured_index()
    if configured:
        return configured
    try:
        from pip._internal.models.index import PyPI
    except Exception:
        return None
    url = getattr(PyPI, "simple_url", None)
    return url if isinstance(url, str) and url.startswith("https://") else None


class _Anchors(HTMLParser):
    """A PEP 503 project page's links: (file name, ``data-requires-python``, yanked)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.files: list[tuple[str, str | None, bool]] = []
        self._open: tuple[str | None, bool] | None = None
        self._text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            found = dict(attrs)
            self._open = (found.get("data-requires-python"), "data-yanked" in found)
            self._text = []

    def handle_data(self, data: str) -> None:
        if self._open is not None:
            self._text.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "a" and self._open is not None:
            self.files.append(("".join(self._text).strip(), *self._open))
            self._open = None


def _from_html(body: bytes, package: str) -> dict[Version, IndexRelease]:
    """Versions and ``Requires-Python`` from a PEP 503 page (no upload times there)."""
    parser = _Anchors()
    parser.feed(body.decode("utf-8", "replace"))
    found: dict[Version, IndexRelease] = {}
    for name, wants, yanked in parser.files:
        version = _version_of(name, package)
        if version is None or yanked:
            continue
        release = IndexRelease(version, _requires_python(wants))
        found[version] = found[version].merged(release) if version in found else release
    return found


def _from_pip(package: str, env: Mapping[str, str]) -> set[Version]:
    try:
        done = _run_pip(package, env)
    except subprocess.TimeoutExpired:
        raise NetworkError(
            f"pip did not list the versions of {package} within {PIP_TIMEOUT_S} s"
        ) from None
    if done.returncode != 0:
        lines = (done.stderr or done.stdout).strip().splitlines()
        last = lines[-1] if lines else "no output"
        if "No matching distribution" in last or "not found" in last.lower():
            raise NotFound(f"no versions of {package} were found on the package index")
        raise NetworkError(f"cannot reach the package index to list {package} ({last})")
    for line in done.stdout.splitlines():
        if line.strip().startswith("Available versions:"):
            found = set()
            for item in line.split(":", 1)[1].split(","):
                try:
                    found.add(Version(item.strip()))
                except InvalidVersion:
                    continue
            return found
    return set()


async def package_releases(
    package: str,
    *,
    index_url: str | None = None,
    prereleases: bool = False,
    net: NetSettings | None = None,
    environ: Mapping[str, str] | None = None,
) -> list[IndexRelease]:
    """Releases newest first; yanked skipped, pre-releases only when asked, and a version
    that cannot name a build (:func:`tag_problem`: far too long) left out."""
    env = os.environ if environ is None else environ
    net = net or NetSettings.from_env(env)
    no_index = env.get("PIP_NO_INDEX", "").strip().lower() in ("1", "true", "yes", "on")
    found = await anyio.to_thread.run_sync(_find_links, env, package)
    if not no_index:
        index = index_url or env.get("PIP_INDEX_URL") or default_index(env)
        listed: dict[Version, IndexRelease]
        if net.offline:
            if not found:
                raise NetworkError(
                    f"listing {package} needs the package index, but BACKENDMGR_OFFLINE is set"
                )
            listed = {}
        elif index:
            listed = await _from_index(index, package, net)
        else:
            versions = await anyio.to_thread.run_sync(_from_pip, package, env)
            listed = {v: IndexRelease(v) for v in versions}
        for version, release in listed.items():
            found[version] = release.merged(found[version]) if version in found else release
    usable = (r for r in found.values() if tag_problem(str(r.version)) is None)
    chosen = (r for r in usable if prereleases or not r.version.is_prerelease)
    return sorted(chosen, key=lambda r: r.version, reverse=True)


async def package_versions(
    package: str,
    *,
    index_url: str | None = None,
    prereleases: bool = False,
    net: NetSettings | None = None,
    environ: Mapping[str, str] | None = None,
) -> list[Version]:
    """:func:`package_releases`' versions alone."""
    releases = await package_releases(
        package, index_url=index_url, prereleases=prereleases, net=net, environ=environ
    )
    return [r.version for r in releases]
