"""A .tar.gz is unpacked into staging while it downloads; nothing is committed before the
digest is checked, and a cut or a restart of the download still ends in the right build."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from pathlib import Path

from backendmgr.mirror import MirrorHandler, MirrorServer
from tests.support import big_release, tree
from tests.support.cli import Cli
from tests.support.wait import wait_until

NAME = "llama-b100-bin-ubuntu-vulkan-x64.tar.gz"


def release(root: Path) -> bytes:
    """The server first, then 4 MiB that do not compress: a stream with a long tail."""
    return big_release(root, size=4 << 20)


def staged(home: Path) -> list[Path]:
    """Files unpacked so far into any staging folder of a build."""
    return [p for p in (home / "builds").rglob("llama-server") if ".staging-" in str(p)]


class PauseMidway:
    """Serves the asset's first ``at`` bytes, then waits (up to 30 s) until the first member
    shows up in a staging folder, and serves the rest, or cuts the connection there."""

    def __init__(self, home: Path, at: int, *, cut: bool = False) -> None:
        self.home = home
        self.at = at
        self.cut = cut
        self.seen_mid_download = False
        self.requests: list[dict[str, str]] = []

    def __call__(self, handler: MirrorHandler) -> bool:
        if not handler.route.startswith("/download/"):
            return False
        self.requests.append(dict(handler.headers.items()))
        if len(self.requests) > 1:
            return False  # the retry is served as the mirror does (Range included)
        path = handler.server.root / "ggml-org/llama.cpp/b100" / NAME
        size = path.stat().st_size
        handler.send_response(200)
        handler.send_header("Content-Length", str(size))
        handler.send_header("ETag", '"' + handler.server.sha256(path)[:32] + '"')
        handler.end_headers()
        data = path.read_bytes()
        handler.wfile.write(data[: self.at])
        handler.wfile.flush()
        with contextlib.suppress(AssertionError):  # the test asserts on what was seen
            wait_until(lambda: staged(self.home), "unpacking began mid-download", timeout=30)
        self.seen_mid_download = bool(staged(self.home))
        if self.cut:
            handler.close_connection = True
            handler.connection.shutdown(2)
            return True
        handler.wfile.write(data[self.at :])
        return True


def installed_sha(cli: Cli) -> str:
    return str(json.loads(cli("--json", "list").out)[0]["sha256"])


def test_unpacks_while_downloading(
    cli: Cli, mirror: MirrorServer, mirror_root: Path, tmp_path: Path
) -> None:
    data = release(mirror_root)
    pause = PauseMidway(tmp_path / "home", len(data) // 2)
    mirror.hooks.append(pause)
    result = cli("install", "llama-server")
    assert result.code == 0, result
    assert pause.seen_mid_download  # the server was unpacked before the last byte was sent
    assert installed_sha(cli) == hashlib.sha256(data).hexdigest()
    assert staged(tmp_path / "home") == []


def test_cut_before_the_first_mib_resumes_with_range(
    cli: Cli, mirror: MirrorServer, mirror_root: Path, tmp_path: Path
) -> None:
    data = release(mirror_root)
    pause = PauseMidway(tmp_path / "home", 300_000, cut=True)
    mirror.hooks.append(pause)
    result = cli("install", "llama-server")
    assert result.code == 0, result
    first, second = pause.requests
    assert "Range" not in first
    assert second["Range"] == "bytes=300000-"  # every byte received before the cut was kept
    assert installed_sha(cli) == hashlib.sha256(data).hexdigest()
    home = tmp_path / "home"
    assert staged(home) == [] and list((home / "downloads").glob("*.part")) == []


def test_a_tampered_stream_is_unpacked_then_thrown_away(
    cli: Cli, mirror: MirrorServer, mirror_root: Path, tmp_path: Path
) -> None:
    """The bytes unpack fine (the archive is intact) but are not the published ones."""
    release(mirror_root)
    original = mirror.releases

    def wrong_digest(owner: str, repo: str) -> list[dict[str, object]] | None:
        listing = original(owner, repo)
        for rel in listing or []:
            for asset in rel["assets"]:
                asset["digest"] = "sha256:" + "0" * 64
        return listing

    mirror.releases = wrong_digest  # type: ignore[method-assign]
    pause = PauseMidway(tmp_path / "home", 2 << 20)
    mirror.hooks.append(pause)
    result = cli("install", "llama-server")
    assert result.code == 1, result
    assert "does not match the published" in result.err
    assert pause.seen_mid_download  # staging had files before verification failed
    home = tmp_path / "home"
    assert (
        not (home / "builds" / "llama-server").exists()
        or tree(home / "builds" / "llama-server") == []
    )
    assert list((home / "downloads").glob("*.part")) == []


def test_a_write_failure_while_streaming_fails_cleanly(
    mirror: MirrorServer, mirror_root: Path, tmp_path: Path
) -> None:
    """Files over 2 MiB cannot be written (RLIMIT_FSIZE, as on a full disk): one error line,
    and neither the part file nor a staging folder is left behind."""
    import resource
    import signal
    import subprocess
    import sys

    release(mirror_root)

    def limited() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (2 << 20, 2 << 20))

    done = subprocess.run(
        [sys.executable, "-m", "backendmgr", "install", "llama-server"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        preexec_fn=limited,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )
    assert done.returncode == 1, done
    assert done.stderr.splitlines()[-1].startswith("error: File too large"), done.stderr
    assert "Traceback" not in done.stderr
    home = tmp_path / "home"
    assert staged(home) == [] and list((home / "downloads").glob("*.part")) == []
    assert (
        not (home / "builds" / "llama-server").exists()
        or tree(home / "builds" / "llama-server") == []
    )


# What only another kind of install, another command or a regeneration needs (issue 34)
NOT_AN_ARCHIVE_INSTALLS = (
    "backendmgr.manager.models",  # the planner: install --no-generate plans nothing
    "backendmgr.emit.plan",
    "backendmgr.api_models.generate",
    "backendmgr.install.zipstream",  # a zip's streaming
    "backendmgr.install.venv_job",  # a venv's build
    "packaging.tags",  # a venv's lock check
    "backendmgr.api_models.catalog",  # components and releases
    "backendmgr.requests.releases",
)


def test_an_archive_install_loads_only_what_it_uses(
    mirror: MirrorServer, mirror_root: Path, tmp_path: Path
) -> None:
    from tests.support.startup import loaded_after

    release(mirror_root)
    out, loaded = loaded_after(
        "install", "llama-server", "--no-generate", heavy=NOT_AN_ARCHIVE_INSTALLS
    )
    assert "installed llama-server@b100-vulkan" in out, out
    assert loaded == []
