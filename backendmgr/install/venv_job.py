"""One Python-packaged build: a virtual environment per version and variant (SPEC §8).

Venvs are not relocatable, so the build is made in its final folder under the build lock, and
the receipt, written last, is the commit marker: a crash mid-install leaves a folder that is
never listed and that ``doctor --fix`` removes.
"""

from __future__ import annotations

import collections
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import anyio

from .._version import __version__
from ..catalog.manifest import Manifest, PypiSource
from ..errors import InstallFailed
from .events import EventSink, ProgressEvent
from .smoke import smoke_check
from .store import BuildStore, Receipt, folder_size

__all__ = ["VenvPlan", "find_uv", "install_venv", "pip_options"]


@dataclass(frozen=True, slots=True)
class VenvPlan:
    manifest: Manifest
    version: str
    variant: str
    target: Path
    uv: str | None
    pip_args: tuple[str, ...]

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
    process = await anyio.open_process(
        list(argv), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=dict(env)
    )
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
        with anyio.CancelScope(shield=True):
            process.kill()
            await process.wait()
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
    env = dict(environ)
    if plan.target.exists():
        shutil.rmtree(plan.target)  # a half-made venv from an interrupted install
    plan.target.parent.mkdir(parents=True, exist_ok=True)
    interpreter = _python_for(plan)
    try:
        if plan.uv:
            await _run(
                [plan.uv, "venv", "--quiet", *interpreter, str(plan.target)], emit, env, "uv venv"
            )
            await _run(
                [
                    plan.uv,
                    "pip",
                    "install",
                    "--python",
                    str(plan.python),
                    *pip_options(env),
                    *plan.pip_args,
                    plan.requirement,
                ],
                emit,
                env,
                "uv pip install",
            )
        else:
            await _run([interpreter[0], "-m", "venv", str(plan.target)], emit, env, "venv")
            await _run(
                [
                    str(plan.python),
                    "-m",
                    "pip",
                    "install",
                    "--disable-pip-version-check",
                    *plan.pip_args,
                    plan.requirement,
                ],
                emit,
                env,
                "pip install",
            )
        exe = plan.target / plan.manifest.exe_for("windows" if os.name == "nt" else "linux")
        if not exe.is_file():
            raise InstallFailed(f"{plan.requirement} installed no {exe.name} executable")
        if smoke:
            await smoke_check(exe, plan.manifest.version_args)
        python_version, packages = await anyio.to_thread.run_sync(_describe, plan)
        if emit is not None:
            emit(ProgressEvent("committing"))
        receipt = Receipt(
            component=plan.manifest.id,
            version=plan.version,
            variant=plan.variant,
            source=f"pypi:{plan.package}",
            exe=exe.relative_to(plan.target).as_posix(),
            kind=plan.manifest.kind,
            name=plan.manifest.name,
            assets=[],
            installed_at=datetime.now(UTC),
            size_bytes=folder_size(plan.target),
            backendmgr_version=__version__,
            python=python_version,
            packages=packages,
        )
        with anyio.CancelScope(shield=True):
            store.write_receipt(plan.target, receipt)
    except BaseException:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(lambda: shutil.rmtree(plan.target, ignore_errors=True))
        raise
    return receipt


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
