"""Which Python a venv build is made from (SPEC §1, §8): the package's own ``Requires-Python``
decides, not a fixed value. ``BACKENDMGR_PYTHON`` always wins; then the interpreter running
backendmgr, then installed ones (``python3.X`` on PATH, uv's managed ones, pyenv's), newest
first; only then a download (uv), and when none of that works, one line saying which versions
would do and how to provide one.

Every candidate is asked its own version (a pyenv shim may name a version it cannot run), each
run bounded, so a broken interpreter costs a few seconds at most.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from ..errors import InstallFailed, UsageError
from ..immutable import frozen

__all__ = [
    "Interpreter",
    "choose_interpreter",
    "fitting_versions",
    "no_interpreter",
    "python_spec",
]

ASK_TIMEOUT_S = 10.0
"""How long one candidate has to say its version (a pyenv shim starts pyenv first)."""
MINORS = range(8, 20)
"""The ``3.X`` minors looked for on PATH and named in messages."""
_ASK = "import sys; print('%d.%d.%d' % sys.version_info[:3])"


@frozen(slots=True)
class Interpreter:
    path: str
    version: Version
    how: str
    """Where it was found: ``BACKENDMGR_PYTHON``, ``running``, ``PATH``, ``uv``, ``pyenv``."""


def python_spec(requires_python: str | None, manifest_python: str | None) -> SpecifierSet:
    """The versions a venv may use: the package's ``Requires-Python``, narrowed by a version
    the manifest names (``python: "3.12"`` → ``==3.12.*``). A malformed declaration from the
    index is ignored rather than trusted or fatal (pip ignores it as well)."""
    spec = SpecifierSet()
    for text in (requires_python, f"=={manifest_python}.*" if manifest_python else None):
        if text:
            with contextlib.suppress(InvalidSpecifier):
                spec &= SpecifierSet(text)
    return spec


def fitting_versions(spec: SpecifierSet) -> list[str]:
    """The ``3.X`` minors that satisfy ``spec`` (judged at their first and last patch
    releases), for a message: "3.10, 3.11, 3.12"."""
    return [f"3.{minor}" for minor in MINORS if _minor_fits(minor, spec)]


def _ask(path: str) -> Version | None:
    """The version ``path`` reports, or None when it does not run or answers nonsense."""
    try:
        done = subprocess.run(
            [path, "-I", "-c", _ASK],
            capture_output=True,
            text=True,
            timeout=ASK_TIMEOUT_S,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    try:
        return Version(done.stdout.strip()[:32])
    except InvalidVersion:
        return None


def _running() -> Interpreter:
    major, minor, micro = sys.version_info[:3]
    return Interpreter(sys.executable, Version(f"{major}.{minor}.{micro}"), "running")


def _minor_fits(minor: int, spec: SpecifierSet) -> bool:
    return any(fits(Version(f"3.{minor}.{patch}"), spec) for patch in (0, 99))


def fits(version: Version, spec: SpecifierSet) -> bool:
    """Whether an interpreter of ``version`` satisfies ``spec``; a pre-release interpreter
    (3.14.0rc1) counts, as it does for pip."""
    return spec.contains(version, prereleases=True)


def _on_path(spec: SpecifierSet, environ: Mapping[str, str]) -> Iterator[tuple[str, str]]:
    search = environ.get("PATH", os.defpath)
    for minor in reversed(MINORS):
        if _minor_fits(minor, spec):
            found = shutil.which(f"python3.{minor}", path=search)
            if found:
                yield found, "PATH"


def _uv_managed(
    uv: str | None, spec: SpecifierSet, environ: Mapping[str, str]
) -> Iterator[tuple[str, str]]:
    if uv is None or not str(spec):
        return
    try:
        done = subprocess.run(
            [uv, "python", "find", "--managed-python", "--no-python-downloads", str(spec)],
            capture_output=True,
            text=True,
            timeout=ASK_TIMEOUT_S * 3,
            check=False,
            env=dict(environ),
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.SubprocessError):
        return
    path = done.stdout.strip().splitlines()[-1:] if done.returncode == 0 else []
    if path and Path(path[0]).is_absolute():
        yield path[0], "uv"


def _pyenv(spec: SpecifierSet, environ: Mapping[str, str]) -> Iterator[tuple[str, str]]:
    root = Path(environ.get("PYENV_ROOT") or Path(environ.get("HOME", "~")) / ".pyenv")
    versions = root.expanduser() / "versions"
    try:
        names = [p.name for p in versions.iterdir()]
    except OSError:
        return
    known = []
    for name in names:
        try:
            version = Version(name)
        except InvalidVersion:
            continue  # a virtualenv or another implementation (pypy3.10-7.3)
        if fits(version, spec):
            known.append((version, name))
    for _, name in sorted(known, reverse=True):
        python = versions / name / "bin" / "python"
        if python.is_file():
            yield str(python), "pyenv"


def choose_interpreter(
    spec: SpecifierSet,
    environ: Mapping[str, str],
    *,
    uv: str | None,
) -> Interpreter | None:
    """The interpreter to make the venv from, or None when no installed one fits (a download
    is the caller's next step). ``BACKENDMGR_PYTHON`` is used whatever ``spec`` says: the user
    chose it; a mismatch is the installer's to report."""
    chosen = environ.get("BACKENDMGR_PYTHON", "").strip()
    if chosen:
        path = shutil.which(chosen, path=environ.get("PATH", os.defpath)) or chosen
        version = _ask(path)
        if version is None:
            raise UsageError(
                f"BACKENDMGR_PYTHON={chosen} does not run as a Python interpreter; "
                "set it to the path of a python3 executable"
            )
        return Interpreter(path, version, "BACKENDMGR_PYTHON")
    running = _running()
    if fits(running.version, spec):
        return running
    seen: set[str] = {os.path.realpath(sys.executable)}
    for source in (_on_path(spec, environ), _uv_managed(uv, spec, environ), _pyenv(spec, environ)):
        for path, how in source:
            real = os.path.realpath(path)
            if real in seen:
                continue
            seen.add(real)
            version = _ask(path)
            if version is not None and fits(version, spec):
                return Interpreter(path, version, how)
    return None


def no_interpreter(package: str, version: str, spec: SpecifierSet, why: str) -> InstallFailed:
    """The one line for "no Python fits": which versions would do and how to provide one."""
    fits = fitting_versions(spec)
    named = f" ({', '.join(fits)})" if fits else ""
    return InstallFailed(
        f"{package} {version} needs Python {spec}{named}; none is installed here and {why}; "
        "install one (uv python install, pyenv install, your package manager) or set "
        "BACKENDMGR_PYTHON=/path/to/python"
    )
