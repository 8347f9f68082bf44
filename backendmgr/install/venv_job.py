"""One Python-packaged build: a virtual environment per version and variant (SPEC §8).

The venv is made in a staging folder beside its final one, checked there, its launchers
pointed at the final path (:func:`relocate`), and committed by the build store's one rename,
as archive builds are: a reinstall keeps the old build until the new one is in place, and a
crash leaves a staging folder that is never listed and that ``doctor --fix`` removes.
"""

from __future__ import annotations

import collections
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import anyio
from packaging.utils import canonicalize_name

from .._fs import atomic_write_bytes
from .._proc import open_group
from ..catalog.manifest import Manifest, PypiSource
from ..errors import InstallFailed
from ..events import EventSink, ProgressEvent
from .commit import check_staged, commit_staged
from .locked import check_locked_packages
from .store import BuildStore, Receipt

__all__ = [
    "VenvPlan",
    "find_uv",
    "install_venv",
    "pip_options",
    "probe_tool_parsers",
    "relocate",
]


@dataclass(frozen=True, slots=True)
class VenvPlan:
    manifest: Manifest
    version: str
    variant: str
    target: Path
    uv: str | None
    pip_args: tuple[str, ...]
    pins: tuple[tuple[str, str], ...] = ()
    """From a lock file: every distribution the venv must hold, exactly (name, version)."""

    @property
    def pin_args(self) -> list[str]:
        """``name==version`` for every pin but the package itself (its requirement)."""
        own = canonicalize_name(self.package)
        return [f"{n}=={v}" for n, v in self.pins if canonicalize_name(n) != own]

    @property
    def package(self) -> str:
        assert isinstance(self.manifest.source, PypiSource)
        return self.manifest.source.package

    @property
    def requirement(self) -> str:
        return f"{self.package}=={self.version}"

    @property
    def python(self) -> Path:
        return self.target / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def find_uv(environ: Mapping[str, str]) -> str | None:
    """``BACKENDMGR_UV`` (a path, or ``none``), else uv beside this interpreter or on PATH."""
    chosen = environ.get("BACKENDMGR_UV")
    if chosen is not None:
        return None if chosen.strip().lower() in ("", "0", "none", "off") else chosen
    beside = Path(sys.executable).parent / "uv"
    if beside.is_file():
        return str(beside)
    return shutil.which("uv")


def pip_options(environ: Mapping[str, str]) -> list[str]:
    """pip's environment spelled as flags, for uv, which reads only its own variables."""
    out: list[str] = []
    if environ.get("PIP_INDEX_URL"):
        out += ["--index-url", environ["PIP_INDEX_URL"]]
    for extra in environ.get("PIP_EXTRA_INDEX_URL", "").split():
        out += ["--extra-index-url", extra]
    for link in environ.get("PIP_FIND_LINKS", "").split():
        out += ["--find-links", link]
    if environ.get("PIP_NO_INDEX", "").strip().lower() in ("1", "true", "yes", "on"):
        out.append("--no-index")
    return out


async def _run(
    argv: Sequence[str], emit: EventSink | None, env: Mapping[str, str], what: str
) -> None:
    """Run an installer step, streaming its lines as events; fail with its last lines."""
    tail: collections.deque[str] = collections.deque(maxlen=8)
    from .probe import stop_group

    process = await open_group(argv, env=env)  # a build backend's helpers stop with it
    try:
        assert process.stdout is not None
        buffer = b""
        async for chunk in process.stdout:
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for raw in lines:
                line = raw.decode("utf-8", "replace").rstrip()
                if line:
                    tail.append(line)
                    if emit is not None:
                        emit(ProgressEvent("downloading", message=line))
        code = await process.wait()
    except BaseException:
        await stop_group(process)
        raise
    if code != 0:
        raise InstallFailed(f"{what} failed with exit status {code}: {' | '.join(tail)}")


def _python_for(plan: VenvPlan) -> list[str]:
    wanted = plan.manifest.python
    if plan.uv:
        return ["--python", wanted or sys.executable]
    if wanted and not sys.version.startswith(wanted + "."):
        found = shutil.which(f"python{wanted}")
        if found is None:
            raise InstallFailed(
                f"{plan.manifest.id} wants Python {wanted}; install uv (which "
                f"fetches it) or python{wanted}"
            )
        return [found]
    return [sys.executable]


async def install_venv(
    plan: VenvPlan,
    store: BuildStore,
    *,
    environ: Mapping[str, str],
    emit: EventSink | None = None,
    smoke: bool = True,
) -> Receipt:
    """Build the venv in a staging folder, check it, then commit it as archive builds are.

    An installed build of the same version stays in place, listed and runnable, until the
    new one is committed; a failure or cancellation only removes the staging folder.
    """
    env = dict(environ)
    interpreter = _python_for(plan)
    staging = store.new_staging(plan.target)
    staged = replace(plan, target=staging)
    try:
        prompt = ["--prompt", plan.target.name]  # the name it will have, not the staging one
        if plan.uv:
            await _run(
                [plan.uv, "venv", "--quiet", *prompt, *interpreter, str(staging)],
                emit,
                env,
                "uv venv",
            )
            await _run(
                [
                    plan.uv,
                    "pip",
                    "install",
                    "--python",
                    str(staged.python),
                    *pip_options(env),
                    *plan.pip_args,
                    plan.requirement,
                    *plan.pin_args,
                ],
                emit,
                env,
                "uv pip install",
            )
        else:
            await _run([interpreter[0], "-m", "venv", *prompt, str(staging)], emit, env, "venv")
            await _run(
                [
                    str(staged.python),
                    "-m",
                    "pip",
                    "install",
                    "--disable-pip-version-check",
                    *plan.pip_args,
                    plan.requirement,
                    *plan.pin_args,
                ],
                emit,
                env,
                "pip install",
            )
        exe = staging / plan.manifest.exe_for("windows" if os.name == "nt" else "linux")
        if not exe.is_file():
            raise InstallFailed(f"{plan.requirement} installed no {exe.name} executable")
        capabilities = await check_staged(exe, plan.manifest, smoke=smoke)
        python_version, packages = await anyio.to_thread.run_sync(_describe, staged)
        if plan.pins:
            check_locked_packages(packages, plan.pins)
        parsers = await probe_tool_parsers(staged.python) if plan.manifest.kind == "vllm" else None
        if emit is not None:
            emit(ProgressEvent("committing"))
        await anyio.to_thread.run_sync(relocate, staging, plan.target)
        receipt = await commit_staged(
            store,
            plan,
            staging,
            exe,
            capabilities,
            python=python_version,
            packages=packages,
            tool_parsers=parsers,
        )
    except BaseException:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(lambda: shutil.rmtree(staging, ignore_errors=True))
        raise
    return receipt


RELOCATE_LIMIT = 1 << 20
"""Scripts larger than this are not launchers and are left as they are."""


def relocate(staging: Path, final: Path) -> None:
    """Point the venv's launchers at the folder it is about to be renamed to.

    pip and uv write the venv's absolute path into the console scripts' ``#!`` lines, the
    activate scripts and ``pyvenv.cfg``; nothing else needs it (``.pyc`` files get their
    path fixed when imported). Text files only: a binary launcher is left alone.
    """
    old, new = os.fsencode(staging), os.fsencode(final)
    scripts = staging / ("Scripts" if os.name == "nt" else "bin")
    candidates = [staging / "pyvenv.cfg"]
    if scripts.is_dir():
        candidates += sorted(scripts.iterdir())
    for path in candidates:
        if path.is_symlink() or not path.is_file() or path.stat().st_size > RELOCATE_LIMIT:
            continue
        data = path.read_bytes()
        if old in data and b"\0" not in data:
            atomic_write_bytes(path, data.replace(old, new))


def _describe(plan: VenvPlan) -> tuple[str, dict[str, str]]:
    code = (
        "import json, sys, importlib.metadata as m; print(json.dumps([sys.version.split()[0],"
        " {d.metadata['Name']: d.version for d in m.distributions()}]))"
    )
    out = subprocess.run(
        [str(plan.python), "-c", code], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    version, packages = json.loads(out)
    return str(version), {str(k): str(v) for k, v in sorted(packages.items())}


PROBE_MARK = "backendmgr-tool-parsers:"
PROBE_TIMEOUT_S = 120.0
"""Importing vLLM's parser registry pulls in torch: slow, but bounded."""
PROBE_OUTPUT_LIMIT = 256 * 1024
PROBE_MAX_NAMES = 1000
_PARSER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
# The registry moved from vllm.entrypoints.openai.tool_parsers to vllm.tool_parsers; eager
# registrations live in ``tool_parsers``, lazy ones (newer builds) in ``lazy_parsers``. vLLM logs
# to stdout, so the answer is the one line that carries the mark.
_PROBE = f"""
import json
names = None
for path in ("vllm.tool_parsers", "vllm.entrypoints.openai.tool_parsers"):
    try:
        manager = __import__(path, fromlist=["ToolParserManager"]).ToolParserManager
    except Exception:
        continue
    found = set()
    for attr in ("tool_parsers", "lazy_parsers"):
        table = getattr(manager, attr, None)
        if isinstance(table, dict):
            found.update(k for k in table if isinstance(k, str))
    names = sorted(found)
    break
print({PROBE_MARK!r} + json.dumps(names), flush=True)
"""


async def probe_tool_parsers(python: Path) -> list[str] | None:
    """The tool-call parsers the venv's vLLM registers, asked of its own Python once.

    Any failure (no registry, a crash, a timeout, too much output, a malformed answer) is
    "unknown" (None), never a failed install: the emitter then trusts its table.
    """
    try:
        out = await _bounded_output([str(python), "-I", "-c", _PROBE], PROBE_OUTPUT_LIMIT)
    except OSError:  # TimeoutError is one
        return None
    if out is None:
        return None
    for raw in reversed(out.splitlines()):
        line = raw.decode("utf-8", "replace").strip()
        if line.startswith(PROBE_MARK):
            return _parser_names(line[len(PROBE_MARK) :])
    return None


def _parser_names(text: str) -> list[str] | None:
    try:
        names = json.loads(text)
    except ValueError:
        return None
    if not isinstance(names, list) or len(names) > PROBE_MAX_NAMES:
        return None
    if not all(isinstance(n, str) and _PARSER_NAME.fullmatch(n) for n in names):
        return None
    return sorted(set(names))


async def _bounded_output(argv: list[str], limit: int) -> bytes | None:
    """The command's stdout if it exits 0 within ``limit`` bytes and the probe's time; the
    process and anything it started are stopped on every way out (one mechanism:
    :func:`~backendmgr.install.probe.run_in_group`)."""
    from .probe import run_in_group

    done = await run_in_group(argv, timeout=PROBE_TIMEOUT_S, limit=limit, merge=False)
    return done.out if done.code == 0 and not done.overflowed else None
