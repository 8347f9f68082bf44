"""Wire behaviour of the downloader and the release listing, against the loopback mirror."""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path

import pytest

from backendmgr.mirror import MirrorHandler, MirrorServer
from tests.support import NAME, big_release, publish_llama
from tests.support.cli import Cli, CliResult, error_line
from tests.support.hostile_files import KINDS, plant


def downloads(server: MirrorServer) -> list[dict[str, str]]:
    return [headers for path, headers in server.requests if path.startswith("/download/")]


class Faults:
    """Answers the Nth download request with a scripted fault, then lets the mirror serve."""

    def __init__(self, *script: str) -> None:
        self.script = list(script)
        self.count = 0

    def __call__(self, handler: MirrorHandler) -> bool:
        if not handler.route.startswith("/download/"):
            return False
        self.count += 1
        if not self.script:
            return False
        fault = self.script.pop(0)
        if fault == "ok":
            return False
        if fault in ("500", "503"):
            handler.send_json(int(fault), {"message": "busy"}, {"Retry-After": "0"})
        elif fault == "404":
            handler.send_json(404, {"message": "Not Found"})
        elif fault == "reset":
            handler.close_connection = True
            handler.connection.shutdown(2)
        elif fault == "half":
            path = handler.server.root / "ggml-org/llama.cpp/b100" / NAME
            size = path.stat().st_size
            etag = '"' + handler.server.sha256(path)[:32] + '"'
            handler.send_response(200)
            handler.send_header("Content-Length", str(size))
            handler.send_header("ETag", etag)
            handler.end_headers()
            handler.stream_file(path, 0, size, cut_after=size // 2)
        elif fault == "ignore-range":
            del handler.headers["Range"]
            return False
        return True


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def installed_sha(cli: Cli) -> str:
    listed = json.loads(cli("--json", "list").out)
    return str(listed[0]["sha256"])


def test_cut_connection_resumes_with_range(
    cli: Cli, mirror: MirrorServer, mirror_root: Path
) -> None:
    data = big_release(mirror_root)
    mirror.hooks.append(Faults("half"))
    result = cli("install", "llama-server")
    assert result.code == 0, result
    first, second = downloads(mirror)
    assert "Range" not in first
    assert second["Range"].startswith("bytes=") and int(second["Range"][6:-1]) > 0
    assert second["If-Range"].startswith('"')
    assert installed_sha(cli) == sha(data)


def test_server_ignoring_range_restarts_cleanly(
    cli: Cli, mirror: MirrorServer, mirror_root: Path
) -> None:
    data = big_release(mirror_root)
    mirror.hooks.append(Faults("half", "ignore-range"))
    result = cli("install", "llama-server")
    assert result.code == 0, result
    assert len(downloads(mirror)) == 2
    assert installed_sha(cli) == sha(data)


@pytest.mark.parametrize("kind", ["link", "fifo", "hard link", "folder"])
def test_a_part_file_that_is_no_file_is_replaced_never_followed(
    cli: Cli, mirror: MirrorServer, mirror_root: Path, tmp_path: Path, kind: str
) -> None:
    """A leftover ``.part`` (and its ETag note) that is a link: the resume would hash its
    target as bytes already there and append the download to it, a file anywhere; a FIFO: the
    install would wait on it for ever; a hard link (a backup made with ``cp -al``) would have
    its other name's file grow; a folder would stop every install of it. Each is removed and
    the download starts over."""
    data = big_release(mirror_root)
    mirror.hooks.append(Faults("half", "404"))
    assert cli("install", "llama-server").code == 1  # cut, then gone: the part file stays
    (part,) = (tmp_path / "home" / "downloads").glob("*.part")
    meta = part.with_name(part.name + ".json")
    canary = tmp_path / "canary"
    canary.write_bytes(b"not yours\n")
    for path in (part, meta):
        path.unlink()
        if kind == "link":
            path.symlink_to(canary)
        elif kind == "hard link":
            os.link(canary, path)
        elif kind == "folder":
            (path / "inside").mkdir(parents=True)
        else:
            os.mkfifo(path)
    result = cli("install", "llama-server")
    assert result.code == 0, result
    assert installed_sha(cli) == sha(data)
    assert canary.read_bytes() == b"not yours\n"
    assert "Range" not in downloads(mirror)[-1]  # nothing was taken for bytes already there


def test_retries_500_503_and_reset(cli: Cli, mirror: MirrorServer, mirror_root: Path) -> None:
    data = publish_llama(mirror_root, "b100")[NAME]
    faults = Faults("reset", "500", "503")
    mirror.hooks.append(faults)
    result = cli("install", "llama-server")
    assert result.code == 0, result
    assert faults.count == 4
    assert installed_sha(cli) == sha(data)


def test_gives_up_after_five_retries(cli: Cli, mirror: MirrorServer, mirror_root: Path) -> None:
    publish_llama(mirror_root, "b100")
    faults = Faults(*["503"] * 10)
    mirror.hooks.append(faults)
    result = cli("install", "llama-server")
    assert result.code == 1
    assert "failed after 5 retries without progress (HTTP 503)" in result.err
    assert faults.count == 6


def test_no_retry_on_404(
    cli: Cli, mirror: MirrorServer, mirror_root: Path, config_path: Path
) -> None:
    publish_llama(mirror_root, "b100")
    faults = Faults("404")
    mirror.hooks.append(faults)
    result = cli("install", "llama-server")
    assert result.code == 1 and faults.count == 1
    assert f"HTTP 404 for {mirror.base_url}/download/ggml-org/llama.cpp/b100/{NAME}" in result.err
    assert not config_path.exists()


def test_rate_limit_names_reset_time(cli: Cli, mirror: MirrorServer, mirror_root: Path) -> None:
    publish_llama(mirror_root, "b100")
    reset = int(time.time()) + 3600

    def limited(handler: MirrorHandler) -> bool:
        if handler.route.startswith("/repos/"):
            handler.send_json(
                403,
                {"message": "API rate limit exceeded"},
                {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(reset)},
            )
            return True
        return False

    mirror.hooks.append(limited)
    result = cli("releases", "llama-server")
    assert result.code == 1
    when = time.strftime("%H:%M", time.localtime(reset))
    assert result.err.startswith(f"error: GitHub rate limit reached; resets at {when}")
    assert result.err.rstrip().endswith("set GITHUB_TOKEN")


@pytest.mark.parametrize(
    "location",
    [
        "http://localhost:{port}/download/x",
        "https://downloads.example.com/x",
        "ftp://127.0.0.1/x",
        "http://127.0.0.2:{port}/download/x",
    ],
)
def test_redirect_outside_allowlist_is_refused(
    cli: Cli, mirror: MirrorServer, mirror_root: Path, location: str
) -> None:
    publish_llama(mirror_root, "b100")
    port = mirror.server_address[1]

    def redirect(handler: MirrorHandler) -> bool:
        if handler.route.startswith("/download/"):
            handler.send_response(302)
            handler.send_header("Location", location.format(port=port))
            handler.send_header("Content-Length", "0")
            handler.end_headers()
            return True
        return False

    mirror.hooks.append(redirect)
    result = cli("install", "llama-server")
    assert result.code == 1
    assert "refusing" in result.err
    assert len(downloads(mirror)) == 1


def test_token_goes_to_the_api_only(
    cli: Cli, mirror: MirrorServer, mirror_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    publish_llama(mirror_root, "b100")
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_secret")
    moved = {"done": False}

    def redirect_once(handler: MirrorHandler) -> bool:
        # a same-host redirect, as a CDN hop would be: still no token
        if handler.route.startswith("/download/") and not moved["done"]:
            moved["done"] = True
            handler.send_response(302)
            handler.send_header("Location", handler.path + "?hop=1")
            handler.send_header("Content-Length", "0")
            handler.end_headers()
            return True
        return False

    mirror.hooks.append(redirect_once)
    assert cli("install", "llama-server").code == 0
    api = [h for p, h in mirror.requests if p.startswith("/repos/")]
    assert api and all(h.get("Authorization") == "Bearer ghp_secret" for h in api)
    assert len(downloads(mirror)) == 2
    assert all("Authorization" not in h for h in downloads(mirror))


def test_listing_cache_window_etag_and_refresh(
    cli: Cli, mirror: MirrorServer, mirror_root: Path
) -> None:
    publish_llama(mirror_root, "b100")
    assert cli("releases", "llama-server").code == 0
    assert cli("releases", "llama-server").code == 0
    listings = [h for p, h in mirror.requests if p.startswith("/repos/")]
    assert len(listings) == 1  # the second came from the cache
    assert cli("releases", "llama-server", "--refresh").code == 0
    listings = [h for p, h in mirror.requests if p.startswith("/repos/")]
    assert len(listings) == 2 and listings[1]["If-None-Match"].startswith('"')


def test_the_listing_cache_is_replaced_whole_without_an_fsync(
    cli: Cli, mirror: MirrorServer, mirror_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cache needs its rename (no reader sees half a file), not the disk: a crash that loses
    it costs one listing. Its writes call no fsync, of the file or of its folder."""
    import os

    synced: list[str] = []
    real = os.fsync

    def recording(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real(fd)

    monkeypatch.setattr(os, "fsync", recording)
    publish_llama(mirror_root, "b100")
    assert cli("releases", "llama-server", "--refresh").code == 0
    cache = os.environ["BACKENDMGR_HOME"] + "/cache"
    written = list(Path(cache).rglob("*.json"))
    assert len(written) == 1 and json.loads(written[0].read_text())["releases"]
    assert [path for path in synced if path.startswith(cache)] == []


@pytest.mark.parametrize("kind", KINDS)
def test_a_hostile_listing_cache_is_no_cache(
    cli: Cli, mirror: MirrorServer, mirror_root: Path, tmp_path: Path, kind: str
) -> None:
    """JSON nested 100 000 deep in the listing cache's place escaped its reader (a traceback),
    a FIFO hung every command that lists releases, a link to /dev/zero read for ever: each is
    no cache, the listing is fetched again and the cache written anew (over a link: refused
    in one line, as every file of backendmgr's own is, and the link left alone)."""
    import threading

    publish_llama(mirror_root, "b100")
    assert cli("releases", "llama-server").code == 0
    [cache] = (tmp_path / "home" / "cache").rglob("*.json")
    cache.unlink()
    plant(cache, kind)
    results: list[CliResult] = []
    listing = threading.Thread(
        target=lambda: results.append(cli("releases", "llama-server")), daemon=True
    )
    listing.start()
    listing.join(30)
    assert len(results) == 1, "the listing hung"
    assert len([p for p, _ in mirror.requests if p.startswith("/repos/")]) == 2
    if kind == "link":
        assert error_line(results[0]).endswith("remove the link")
        assert cache.is_symlink()
    else:
        assert results[0].code == 0, results[0]
        assert json.loads(cache.read_text())["releases"]  # a regular file again


def test_offline_serves_an_expired_cache(
    cli: Cli,
    mirror: MirrorServer,
    mirror_root: Path,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    publish_llama(mirror_root, "b100")
    assert cli("releases", "llama-server").code == 0
    for cache in (tmp_path / "home" / "cache").rglob("*.json"):
        payload = json.loads(cache.read_text())
        payload["fetched_at"] = 0
        cache.write_text(json.dumps(payload))
    monkeypatch.setenv("BACKENDMGR_OFFLINE", "1")
    result = cli("--json", "releases", "llama-server")
    assert result.code == 0 and json.loads(result.out)[0]["tag"] == "b100"
    assert len([p for p, _ in mirror.requests if p.startswith("/repos/")]) == 1
    dl = cli("install", "llama-server")
    assert dl.code == 1 and "needs the network, but BACKENDMGR_OFFLINE is set" in dl.err


def test_invalid_repo_in_user_manifest_is_refused(
    cli: Cli, mirror: MirrorServer, config_path: Path
) -> None:
    folder = config_path.parent / "manifests"
    folder.mkdir(parents=True)
    (folder / "x.yaml").write_text(
        "id: x\nkind: llama\nsource: {type: github, repo: 'a/..'}\nexe: {default: x}\n"
        "variants: [{id: cpu, assets: {linux-x64: ['x']}}]\n"
    )
    result = cli("install", "x")
    assert result.code == 1 and "field source.github.repo" in result.err
