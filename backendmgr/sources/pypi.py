"""Versions of a Python package (SPEC §6, PyPI source), from wherever pip would look.

``PIP_NO_INDEX`` + ``PIP_FIND_LINKS``: the local folders' file names. A configured index (the
manifest's ``index_url`` or ``PIP_INDEX_URL``): its PEP 691 JSON page. Otherwise pip itself is
asked (``pip index versions``), so pip's own configuration decides where that is.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import unquote, urlsplit

from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import InvalidVersion, Version

from ..errors import NetworkError, NotFound

__all__ = ["package_versions"]

PEP691 = "application/vnd.pypi.simple.v1+json"


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


def _find_links(env: Mapping[str, str], package: str) -> set[Version]:
    found: set[Version] = set()
    for entry in env.get("PIP_FIND_LINKS", "").split():
        path = Path(unquote(urlsplit(entry).path)) if entry.startswith("file:") else Path(entry)
        if path.is_dir():
            for file in path.iterdir():
                version = _version_of(file.name, package)
                if version is not None:
                    found.add(version)
    return found


def _from_index(index_url: str, package: str) -> set[Version]:
    import httpx

    url = f"{index_url.rstrip('/')}/{canonicalize_name(package)}/"
    try:
        response = httpx.get(url, headers={"Accept": PEP691}, follow_redirects=True, timeout=30)
    except httpx.HTTPError as exc:
        raise NetworkError(f"cannot reach the package index {index_url} ({exc!s})") from exc
    if response.status_code == 404:
        raise NotFound(f"the package index {index_url} has no package {package}")
    if response.status_code != 200 or PEP691 not in response.headers.get("content-type", ""):
        raise NetworkError(
            f"the package index {index_url} answered HTTP "
            f"{response.status_code} without PEP 691 JSON for {package}"
        )
    found: set[Version] = set()
    for file in response.json().get("files", []):
        if file.get("yanked"):
            continue
        version = _version_of(str(file.get("filename", "")), package)
        if version is not None:
            found.add(version)
    return found


def _from_pip(package: str, env: Mapping[str, str]) -> set[Version]:
    done = subprocess.run(
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
        timeout=120,
        check=False,
    )
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


def package_versions(
    package: str,
    *,
    index_url: str | None = None,
    prereleases: bool = False,
    offline: bool = False,
    environ: Mapping[str, str] | None = None,
) -> list[Version]:
    """Versions newest first; yanked skipped, pre-releases only when asked."""
    env = os.environ if environ is None else environ
    no_index = env.get("PIP_NO_INDEX", "").strip().lower() in ("1", "true", "yes", "on")
    found = _find_links(env, package)
    if not no_index:
        index = index_url or env.get("PIP_INDEX_URL")
        if offline:
            if not found:
                raise NetworkError(
                    f"listing {package} needs the package index, but BACKENDMGR_OFFLINE is set"
                )
        elif index:
            found |= _from_index(index, package)
        else:
            found |= _from_pip(package, env)
    return sorted((v for v in found if prereleases or not v.is_prerelease), reverse=True)
