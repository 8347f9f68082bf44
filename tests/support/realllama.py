"""The REAL llama.cpp server, installed once per test run, and a tiny real GGUF to serve.

``../shared/llama.cpp`` holds a real release archive of llama.cpp (b11434, CPU) and a 9 MB GGUF
with random weights (see its ``SOURCE``). The session fixture installs the archive the way a
user does (``backendmgr install llama-server b11434 --variant cpu``) from the loopback
GitHub-style release server into a home under pytest's cache folder, keyed by the archive's
SHA-256, so later runs reuse it; each test gets a copy of that home. A machine without
``../shared`` skips, saying so.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.paths import SHARED
from tests.support.releases import LLAMA_REPO, publish

__all__ = [
    "REAL_ARCHIVE",
    "REAL_GGUF",
    "REAL_TAG",
    "RealLlama",
    "needs_real_llama",
    "prepare",
    "real_llama",
    "real_llama_cached",
    "real_llama_home",
]

REAL_TAG = "b11434"
REAL_DIR = SHARED / "llama.cpp"
REAL_ARCHIVE = REAL_DIR / f"llama-{REAL_TAG}-bin-ubuntu-x64.tar.gz"
REAL_GGUF = REAL_DIR / "tiny-random-llama-f16.gguf"
REAL_BUILD = f"llama-server@{REAL_TAG}-cpu"
CPU = ("--variant", "cpu", "--activate", "--no-generate")

needs_real_llama = pytest.mark.skipif(
    not (REAL_ARCHIVE.is_file() and REAL_GGUF.is_file()),
    reason=f"the real llama.cpp archive and tiny GGUF are not in {REAL_DIR}",
)


@dataclass(frozen=True)
class RealLlama:
    """A test's home with the real build installed and activated, and its config serving the
    tiny GGUF as model ``tiny``."""

    home: Path
    config: Path
    models: Path
    build: str  # its build id
    server: Path  # the installed llama-server


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _install(home: Path) -> None:
    """``backendmgr install`` of the real archive into ``home``, from a loopback mirror, in a
    child process (the test process's environment stays as the test made it)."""
    from backendmgr.mirror import MirrorServer

    mirror = home.parent / "mirror"
    shutil.rmtree(mirror, ignore_errors=True)
    publish(mirror, LLAMA_REPO, REAL_TAG, {REAL_ARCHIVE.name: REAL_ARCHIVE.read_bytes()})
    server = MirrorServer(mirror).start()
    env = {k: v for k, v in os.environ.items() if not k.startswith("BACKENDMGR_")}
    env.update(
        BACKENDMGR_HOME=str(home),
        BACKENDMGR_CONFIG=str(home / "config.yaml"),
        BACKENDMGR_GITHUB_API=server.base_url,
        BACKENDMGR_GPU="none",
    )
    try:
        done = subprocess.run(
            [sys.executable, "-m", "backendmgr", "install", "llama-server", REAL_TAG, *CPU],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    finally:
        server.stop()
        shutil.rmtree(mirror, ignore_errors=True)
    if done.returncode != 0:
        raise AssertionError(f"installing the real llama.cpp failed: {done.stderr}")


def real_llama_home(cache: Path) -> Path:
    """The cached home holding the installed real build (made once per archive, under a lock
    so that parallel workers make it once)."""
    from filelock import FileLock

    key = _sha256(REAL_ARCHIVE)[:16]
    ready = cache / key / "home"
    with FileLock(str(cache / f"{key}.lock"), timeout=600):
        if not (ready / ".ready").is_file():  # a half-made one (a crash) is made again
            shutil.rmtree(cache / key, ignore_errors=True)
            ready.mkdir(parents=True)
            _install(ready)
            (ready / ".ready").write_text(REAL_TAG)
    return ready


def prepare(cached: Path, tmp_path: Path, extra_args: str = "-t 2") -> RealLlama:
    """A copy of the cached home in ``tmp_path`` as the test's home, and a config serving the
    tiny GGUF (``extra_args`` its flags)."""
    from ruamel.yaml import YAML

    home = tmp_path / "home"
    shutil.copytree(cached / "builds", home / "builds", symlinks=True)
    models = tmp_path / "models"
    models.mkdir(exist_ok=True)
    (models / "tiny.gguf").symlink_to(REAL_GGUF.resolve())
    rows = YAML(typ="safe").load((cached / "config.yaml").read_text())["backends"]
    for row in rows:  # the registry's paths name the cached home: now they name this one
        row["path"] = str(home / Path(row["path"]).relative_to(cached))
    config = tmp_path / "cfg" / "config.yaml"
    config.parent.mkdir(parents=True, exist_ok=True)
    body = {
        "models_dirs": [str(models)],
        "backends": rows,
        "models": {"tiny": {"extra_args": extra_args}},
    }
    config.write_text(json.dumps(body))
    servers = sorted(p for p in home.glob("builds/**/llama-server") if p.is_file())
    assert servers, f"no llama-server under {home / 'builds'}"
    return RealLlama(home, config, models, REAL_BUILD, servers[0])


@pytest.fixture(scope="session")
def real_llama_cached(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """The cached home with the real build (pytest's cache folder, one per archive; this
    run's temporary root, shared by its workers, when the cache is turned off)."""
    if not (REAL_ARCHIVE.is_file() and REAL_GGUF.is_file()):
        pytest.skip(f"the real llama.cpp archive and tiny GGUF are not in {REAL_DIR}")
    cache = getattr(request.config, "cache", None)
    if cache is not None:
        return real_llama_home(cache.mkdir("real-llama"))
    shared = tmp_path_factory.getbasetemp().parent / "real-llama"
    shared.mkdir(parents=True, exist_ok=True)
    return real_llama_home(shared)


@pytest.fixture
def real_llama(real_llama_cached: Path, tmp_path: Path) -> RealLlama:
    """This test's home (``BACKENDMGR_HOME``) and config (``BACKENDMGR_CONFIG``, as
    ``_isolated_env`` sets them) with the real build activated and model ``tiny``."""
    return prepare(real_llama_cached, tmp_path)
