"""One Python-packaged build: a virtual environment per version and variant (SPEC §8).

The venv is made in a staging folder beside its final one, checked there, its launchers
pointed at the final path (:func:`relocate`), and committed by the build store's one rename,
as archive builds are: a reinstall keeps the old build until the new one is in place, and a
crash leaves a staging folder that is never listed and that ``doctor --fix`` removes.

The staging folder has one fixed name per build (``<build>.staging-venv``, under the build
lock), so that a venv whose ``--version`` outlived its bound is kept, marked, and reused by
the next install of the same build instead of being fetched again (a vLLM venv is gigabytes).
The interpreter comes from the package's ``Requires-Python`` (:mod:`.interpreters`); the
``cpu``/``rocm`` variants take torch from the PyTorch index or the user's mirror of it.
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
from dataclasses import replace
from pathlib import Path

import anyio
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from .._fs import apply_umask, atomic_write_bytes
from .._proc import open_group
from ..catalog.manifest import Manifest, PypiSource
from ..errors import InstallFailed, NetworkError
from ..events import EventSink, ProgressEvent
from ..immutable import frozen
from ..net import NetSettings
from .builds import BuildStore
from .commit import check_staged, commit_staged
from .interpreters import Interpreter, choose_interpreter, no_interpreter, python_spec
from .locked import check_locked_packages
from .smoke import SmokeTimedOut
from .store import Receipt, place_apart
from .venv_probe import probe_tool_parsers

__all__ = [
    "KEPT_MARK",
    "VENV_SMOKE_TIMEOUT_S",
    "TorchIndex",
    "VenvPlan",
    "find_uv",
    "install_venv",
    "pip_options",
    "relocate",
]


VENV_SMOKE_TIMEOUT_S = 300.0
"""The bound on a venv build's ``--version`` (config ``venv_smoke_timeout``): vLLM's imports
torch and builds its whole argument parser, 1 to 2 minutes on a busy small machine."""
KEPT_MARK = ".backendmgr-kept.json"
"""In a staging venv kept after its check timed out: what it was built for, so only the same
install reuses it."""
TORCH_INDEX_ENV = "BACKENDMGR_TORCH_INDEX_URL"
TORCH_INDEX_KEY = "torch_index_url"


@frozen(slots=True)
class TorchIndex:
    """Where a ``cpu``/``rocm`` variant takes torch from: uv's ``--torch-backend`` (the
    PyTorch index), or ``url``, the user's mirror of the index for that variant."""

    backend: str
    url: str | None = None
    setting: str = TORCH_INDEX_ENV
    """Which setting gave ``url`` (for messages): the environment variable or the config key."""

    def args(self, uv: bool) -> list[str]:
        """The installer's index options for torch."""
        if self.url is None:
            return ["--torch-backend", self.backend]
        if uv:  # the mirror's "+cpu" builds outrank the package index's plain ones
            return ["--extra-index-url", self.url, "--index-strategy", "unsafe-best-match"]
        return ["--extra-index-url", self.url]


@frozen(slots=True)
class VenvPlan:
    manifest: Manifest
    version: str
    variant: str
    target: Path
    uv: str | None
    pip_args: tuple[str, ...]
    pins: tuple[tuple[str, str], ...] = ()
    """From a lock file: every distribution the venv must hold, exactly (name, version)."""
    requires_python: str | None = None
    """The package's own ``Requires-Python`` for this version, as the index states it."""
    torch: TorchIndex | None = None
    smoke_timeout: float = VENV_SMOKE_TIMEOUT_S
    index_only: str | None = None
    """A variant of the same component that needs no torch index (the way out when it is down)."""
    cannot_run: str | None = None
    """Why this host cannot run the variant (no GPU of its vendor): its ``--version`` is not
    run, the rest of the check is."""

    @property
    def index_args(self) -> list[str]:
        """The variant's own options, then its torch index's."""
        torch = self.torch.args(self.uv is not None) if self.torch else []
        return [*self.pip_args, *torch]

    @property
    def staging(self) -> Path:
        """The one staging folder of this build (the build lock makes it this install's)."""
        return self.target.parent / f"{self.target.name}.staging-venv"

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
    """pip's environment (and the ``index-url`` of pip's config files) spelled as flags, for
    uv, which reads neither."""
    from ..sources.pypi import configured_index

    out: list[str] = []
    index = environ.get("PIP_INDEX_URL") or configured_index()
    if index:
        out += ["--index-url", index]
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
    from .._proc import stop_group

    # a build backend's helpers stop with it, and it stops with us: a killed install must not
    # leave pip or uv writing into a staging folder the next install is cleaning
    process = await open_group(argv, env=env, die_with_parent=True)
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


def plan_interpreter(plan: VenvPlan, environ: Mapping[str, str]) -> Interpreter | None:
    """The installed interpreter the venv would be made from (None: uv must download one)."""
    spec = python_spec(plan.requires_python, plan.manifest.python)
    return choose_interpreter(spec, environ, uv=plan.uv)


async def _make_venv(
    plan: VenvPlan, staging: Path, env: Mapping[str, str], emit: EventSink | None
) -> None:
    """Create the venv from the interpreter ``Requires-Python`` allows, downloading one with
    uv only when none is installed; when that fails too, one line saying what would do."""
    spec = python_spec(plan.requires_python, plan.manifest.python)
    found = await anyio.to_thread.run_sync(lambda: choose_interpreter(spec, env, uv=plan.uv))
    prompt = ["--prompt", plan.target.name]  # the name it will have, not the staging one
    if found is not None and emit is not None:
        emit(
            ProgressEvent(
                "downloading", message=f"Python {found.version} ({found.how}): {found.path}"
            )
        )
    if plan.uv:
        python = found.path if found is not None else str(spec)
        argv = [plan.uv, "venv", "--quiet", *prompt, "--python", python, str(staging)]
        if found is None and _offline(env):
            raise no_interpreter(
                plan.package, plan.version, spec, "BACKENDMGR_OFFLINE forbids a download"
            )
        try:
            await _run(argv, emit, env, "uv venv")
        except InstallFailed as exc:
            if found is not None:
                raise
            raise no_interpreter(
                plan.package, plan.version, spec, f"uv could not download one ({exc})"
            ) from exc
        return
    if found is None:
        raise no_interpreter(
            plan.package, plan.version, spec, "without uv nothing can download one"
        )
    await _run([found.path, "-m", "venv", *prompt, str(staging)], emit, env, "venv")


def _offline(env: Mapping[str, str]) -> bool:
    return env.get("BACKENDMGR_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


def _kept_key(plan: VenvPlan, env: Mapping[str, str]) -> dict[str, object]:
    """What a kept venv must have been built for to be reused."""
    return {
        "requirement": plan.requirement,
        "pins": plan.pin_args,
        "index": [*pip_options(env), *plan.index_args],
        "installer": "uv" if plan.uv else "pip",
    }


def _reusable(plan: VenvPlan, env: Mapping[str, str]) -> bool:
    """Whether the staging folder is a venv kept by an earlier install of this same build;
    anything else there is a crashed install's leftover, removed."""
    staging = plan.staging
    try:
        kept = json.loads((staging / KEPT_MARK).read_text(encoding="utf-8")[: 1 << 16])
    except (OSError, ValueError):
        kept = None
    if kept == _kept_key(plan, env) and (staging / "pyvenv.cfg").is_file():
        return True
    shutil.rmtree(staging, ignore_errors=True)
    return False


async def _check_torch_index(plan: VenvPlan, net: NetSettings) -> None:
    """Before fetching gigabytes: the user's torch index answers for torch."""
    torch = plan.torch
    if torch is None or torch.url is None or net.offline:
        return
    from ..net import get_bounded, make_client

    url = f"{torch.url.rstrip('/')}/torch/"
    try:
        async with make_client(net) as client:
            response = await get_bounded(
                client, net, url, {}, max_bytes=64 << 20, what="the torch index", token=False
            )
    except NetworkError as exc:
        raise torch_unreachable(plan, torch.url, str(exc)) from exc
    if response.status_code != 200:
        raise torch_unreachable(plan, torch.url, f"HTTP {response.status_code} for {url}")


def torch_unreachable(plan: VenvPlan, index: str, detail: str) -> InstallFailed:
    """The one line for a torch index that cannot be used: which, the setting, the way out."""
    torch = plan.torch
    given = f" (set by {torch.setting})" if torch is not None and torch.url else ""
    out = (
        f"cannot reach the PyTorch index {index}{given} that the {plan.variant} variant takes "
        f"torch from ({detail}); point {TORCH_INDEX_ENV} or the config key {TORCH_INDEX_KEY} "
        "at a reachable mirror of it"
    )
    if plan.index_only:
        out += (
            f", or install the {plan.index_only} variant (--variant {plan.index_only}), which "
            "needs only the package index"
        )
    return InstallFailed(out)


_FETCH_FAILED = re.compile(r"Failed to fetch:?\s*`?(https?://[^\s`']+)")


def _torch_failure(plan: VenvPlan, exc: InstallFailed) -> InstallFailed:
    """uv's "Failed to fetch" for a torch index, said as :func:`torch_unreachable` says it;
    any other failure as it was."""
    if plan.torch is None:
        return exc
    found = _FETCH_FAILED.search(str(exc))
    if found is None or ("/whl/" not in found.group(1) and plan.torch.url is None):
        return exc
    url = found.group(1)
    index = plan.torch.url or url.rsplit("/", 2)[0]
    if plan.torch.url is not None and not url.startswith(plan.torch.url.rstrip("/")):
        return exc
    return torch_unreachable(plan, index, f"failed to fetch {url}")


async def install_venv(
    plan: VenvPlan,
    store: BuildStore,
    *,
    environ: Mapping[str, str],
    emit: EventSink | None = None,
    smoke: bool = True,
    net: NetSettings | None = None,
) -> Receipt:
    """Build the venv in a staging folder, check it, then commit it as archive builds are.

    An installed build of the same version stays in place, listed and runnable, until the
    new one is committed; a failure or cancellation removes the staging folder, except after
    a ``--version`` that timed out: that venv is kept for the next install of this build.
    """
    env = dict(environ)
    await _check_torch_index(plan, net or NetSettings.from_env(env))
    staging = plan.staging
    reused = await anyio.to_thread.run_sync(_reusable, plan, env)
    if not reused:
        staging.parent.mkdir(parents=True, exist_ok=True)
        place_apart(staging.parent)  # its thousands of files: see place_apart
        staging.mkdir()
        apply_umask(staging)  # the committed build gets the mode a plain mkdir would give
    elif emit is not None:
        emit(ProgressEvent("downloading", message=f"reusing the venv kept in {staging}"))
    staged = replace(plan, target=staging)
    keep = False
    try:
        if not reused:
            await _make_venv(plan, staging, env, emit)
        (staging / KEPT_MARK).unlink(missing_ok=True)
        try:
            await _pip_install(plan, staged, env, emit)
        except InstallFailed as exc:
            raise _torch_failure(plan, exc) from exc
        exe = staging / plan.manifest.exe_for("windows" if os.name == "nt" else "linux")
        python_version, packages = await anyio.to_thread.run_sync(_describe, staged)
        _check_installed(plan, packages, exe)
        if plan.pins:
            check_locked_packages(packages, plan.pins)
        run_it = smoke and plan.cannot_run is None
        if run_it and emit is not None:
            emit(
                ProgressEvent(
                    "verifying",
                    message=f"running {exe.name} {' '.join(plan.manifest.version_args)} "
                    f"(at most {_shown(plan.smoke_timeout)})…",
                )
            )
        try:
            capabilities = await check_staged(
                exe, plan.manifest, smoke=run_it, timeout=plan.smoke_timeout
            )
        except SmokeTimedOut:
            keep = True
            await anyio.to_thread.run_sync(_mark_kept, plan, env)
            raise InstallFailed(
                f"{exe.name} {' '.join(plan.manifest.version_args)} did not finish within "
                f"{_shown(plan.smoke_timeout)}; the venv is kept in {staging}: run the same "
                "install again to retry "
                f"the check without fetching anything (raise venv_smoke_timeout for a slow "
                "machine), or add --no-smoke and check it later with backendmgr verify"
            ) from None
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
        if not keep:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(lambda: shutil.rmtree(staging, ignore_errors=True))
        raise
    return receipt


async def _pip_install(
    plan: VenvPlan, staged: VenvPlan, env: Mapping[str, str], emit: EventSink | None
) -> None:
    """``<package>==<version>`` (and a lock file's pins) into the staged venv."""
    wanted = [*plan.index_args, plan.requirement, *plan.pin_args]
    if plan.uv:
        argv = [plan.uv, "pip", "install", "--python", str(staged.python), *pip_options(env)]
        await _run([*argv, *wanted], emit, env, "uv pip install")
        return
    argv = [str(staged.python), "-m", "pip", "install", "--disable-pip-version-check"]
    await _run([*argv, *wanted], emit, env, "pip install")


def _check_installed(plan: VenvPlan, packages: Mapping[str, str], exe: Path) -> None:
    """The venv's own metadata holds the package at the pinned version, and its console
    script is there: the part of the check that needs no import of the package."""
    own = canonicalize_name(plan.package)
    have = next((v for n, v in packages.items() if canonicalize_name(n) == own), None)
    if have is None:
        raise InstallFailed(f"the venv holds no {plan.package} after installing {plan.requirement}")
    if not _same_version(have, plan.version):
        raise InstallFailed(f"the venv holds {plan.package} {have}, not {plan.version}")
    if not exe.is_file():
        raise InstallFailed(f"{plan.requirement} installed no {exe.name} executable")


def _same_version(a: str, b: str) -> bool:
    try:
        return Version(a) == Version(b)
    except InvalidVersion:
        return a == b


def _mark_kept(plan: VenvPlan, env: Mapping[str, str]) -> None:
    atomic_write_bytes(plan.staging / KEPT_MARK, json.dumps(_kept_key(plan, env)).encode())


def _shown(seconds: float) -> str:
    """``5 min`` or ``2 s``: a bound as a user reads it."""
    if seconds >= 120 and seconds % 60 == 0:
        return f"{seconds / 60:g} min"
    return f"{seconds:g} s"


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
    """The venv's Python version and its installed distributions, read from its metadata by
    its own interpreter (``-I``: nothing of this process leaks in; no package is imported)."""
    code = (
        "import json, sys, importlib.metadata as m; print(json.dumps([sys.version.split()[0],"
        " {d.metadata['Name']: d.version for d in m.distributions()}]))"
    )
    try:
        done = subprocess.run(
            [str(plan.python), "-I", "-c", code],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        )
        version, packages = json.loads(done.stdout)
        return str(version), {str(k): str(v) for k, v in sorted(packages.items())}
    except (OSError, subprocess.SubprocessError, ValueError, AttributeError) as exc:
        raise InstallFailed(
            f"the venv's Python cannot list what is installed in it ({type(exc).__name__})"
        ) from exc
