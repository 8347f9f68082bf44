"""Versions of a Python package (SPEC §6, PyPI source), from wherever pip would look.

``PIP_NO_INDEX`` + ``PIP_FIND_LINKS``: the local folders' file names. A configured index (the
manifest's ``index_url`` or ``PIP_INDEX_URL``): its PEP 691 JSON page. Otherwise pip itself is
asked (``pip index versions``), so pip's own configuration decides where that is.

The index is read through the shared network client (``net``: timeouts, proxy settings, the
redirect checks and the error map), so a stalled or garbled index is one line, as GitHub is.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import anyio
from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import InvalidVersion, Version

from ..errors import NetworkError, NotFound
from ..net import NetSettings, get_bounded, make_client
from .models import tag_problem

__all__ = ["package_versions"]

PEP691 = "application/vnd.pypi.simple.v1+json"
PIP_TIMEOUT_S = 120
MAX_INDEX_BYTES = 32 << 20  # a project page with every file of a large project is a few MiB


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


async def _from_index(index_url: str, package: str, net: NetSettings) -> set[Version]:
    url = f"{index_url.rstrip('/')}/{canonicalize_name(package)}/"
    where = f"the package index {index_url}"
    try:
        async with make_client(net) as client:
            response = await get_bounded(
                client,
                net,
                url,
                {"Accept": PEP691},
                max_bytes=MAX_INDEX_BYTES,
                what="the index",
                token=False,  # the GitHub token is never sent to an index
            )
    except NetworkError as exc:
        raise NetworkError(f"cannot reach {where} ({exc})") from exc
    if response.status_code == 404:
        raise NotFound(f"{where} has no package {package}")
    if response.status_code != 200 or PEP691 not in response.headers.get("content-type", ""):
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
    found: set[Version] = set()
    for file in files:
        if not isinstance(file, dict) or file.get("yanked"):
            continue
        version = _version_of(str(file.get("filename", "")), package)
        if version is not None:
            found.add(version)
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


async def package_versions(
    package: str,
    *,
    index_url: str | None = None,
    prereleases: bool = False,
    net: NetSettings | None = None,
    environ: Mapping[str, str] | None = None,
) -> list[Version]:
    """Versions newest first; yanked skipped, pre-releases only when asked, and a version
    that cannot name a build (:func:`tag_problem`: far too long) left out."""
    env = os.environ if environ is None else environ
    net = net or NetSettings.from_env(env)
    no_index = env.get("PIP_NO_INDEX", "").strip().lower() in ("1", "true", "yes", "on")
    found = await anyio.to_thread.run_sync(_find_links, env, package)
    if not no_index:
        index = index_url or env.get("PIP_INDEX_URL")
        if net.offline:
            if not found:
                raise NetworkError(
                    f"listing {package} needs the package index, but BACKENDMGR_OFFLINE is set"
                )
        elif index:
            found |= await _from_index(index, package, net)
        else:
            found |= await anyio.to_thread.run_sync(_from_pip, package, env)
    usable = (v for v in found if tag_problem(str(v)) is None)
    return sorted((v for v in usable if prereleases or not v.is_prerelease), reverse=True)
