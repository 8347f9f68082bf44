"""Hostile servers that never stop sending, or never finish: every download and document read
is bounded in size and time, and a refused body leaves no part file (hostile pass 3: D1, D3)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

from backendmgr.errors import VerificationError
from backendmgr.install.download import download
from backendmgr.mirror import MirrorHandler, MirrorServer
from backendmgr.net import NetSettings, make_client
from backendmgr.sources.models import ReleaseAsset
from tests.support import publish_llama
from tests.support.cli import Cli, CliResult, error_line

NAME = "llama-b100-bin-ubuntu-vulkan-x64.tar.gz"
LISTING = "/repos/ggml-org/llama.cpp/releases"
SERVER_CAP = 256 << 20  # the stand-in stops here, so that a client without a bound still ends


class Endless:
    """Answers every download with a body of no length that goes on until the client hangs up
    (or SERVER_CAP), counting what it could write."""

    def __init__(self) -> None:
        self.sent = 0

    def __call__(self, handler: MirrorHandler) -> bool:
        if not handler.route.startswith("/download/") and handler.route != "/endless":
            return False
        handler.send_response(200)
        handler.send_header("Content-Type", "application/octet-stream")
        handler.end_headers()
        handler.close_connection = True
        piece = b"\0" * (1 << 16)
        try:
            while self.sent < SERVER_CAP:
                handler.wfile.write(piece)
                self.sent += len(piece)
        except OSError:
            pass
        return True


def one_line_error(result: CliResult) -> str:
    """The one error line, last, and no internal error."""
    line = error_line(result)
    assert "internal error" not in line and result.err.rstrip().endswith(line), result.err
    return line


def parts(root: Path) -> list[Path]:
    return sorted(root.rglob("*.part")) if root.exists() else []


# --- D1: a body with no end stops at the size listed for it -----------------------------------


def test_install_stops_an_endless_body_at_the_listed_size(
    cli: Cli, mirror: MirrorServer, mirror_root: Path, tmp_path: Path
) -> None:
    size = len(publish_llama(mirror_root, "b100")[NAME])
    endless = Endless()
    mirror.hooks.append(endless)
    began = time.monotonic()
    line = one_line_error(cli("install", "llama-server"))
    assert time.monotonic() - began < 10
    assert line == (
        f"error: {NAME}: the server sent more than the {size} bytes listed for it; "
        "the partial download was discarded"
    )
    assert endless.sent < 32 << 20  # cut at once, not at the server's own end
    assert parts(tmp_path / "home") == []  # it can never be right: nothing kept to resume


def test_fetch_stops_an_endless_body_at_the_locked_size(
    cli: Cli, mirror: MirrorServer, mirror_root: Path, tmp_path: Path
) -> None:
    size = len(publish_llama(mirror_root, "b100")[NAME])
    assert cli("install", "llama-server", "b100").code == 0
    assert cli("lock").code == 0
    endless = Endless()
    mirror.hooks.append(endless)
    carried = tmp_path / "usb"
    line = one_line_error(cli("fetch", str(carried)))
    assert f"sent more than the {size} bytes listed for it" in line
    assert endless.sent < 32 << 20
    assert parts(carried) == []


def test_no_stated_size_is_bounded_by_max_bytes(mirror: MirrorServer, tmp_path: Path) -> None:
    """Neither the release nor the server states a size: the caller's cap (the install passes
    max_unpacked_gb) bounds the body."""
    endless = Endless()
    mirror.hooks.append(endless)
    asset = ReleaseAsset(name="x.tar.gz", url=f"{mirror.base_url}/endless", size=None)
    net = NetSettings(api_base=mirror.base_url)
    folder = tmp_path / "dl"

    async def fetch() -> None:
        async with make_client(net) as client:
            await download(client, net, asset, folder, retries=0, max_bytes=1 << 20)

    with pytest.raises(VerificationError) as caught:
        anyio.run(fetch)
    assert str(caught.value) == (
        "x.tar.gz: the server sent more than the 1048576 bytes allowed for a file of no "
        "stated size (max_unpacked_gb); the partial download was discarded"
    )
    assert endless.sent < 32 << 20
    assert parts(folder) == []


# --- D3: a document that drips in is cut at a whole-read deadline -----------------------------


def trickle(stop: threading.Event) -> Callable[[MirrorHandler], bool]:
    """The listing announced at 100 MB, then one byte well within each read timeout."""

    def serve(handler: MirrorHandler) -> bool:
        if handler.route != LISTING:
            return False
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(100_000_000))
        handler.end_headers()
        handler.close_connection = True
        deadline = time.monotonic() + 8  # a client with no deadline still ends (in error)
        try:
            while time.monotonic() < deadline and not stop.is_set():
                handler.wfile.write(b" ")
                handler.wfile.flush()
                stop.wait(0.05)
        except OSError:
            pass
        return True

    return serve


def test_trickling_listing_is_cut_at_the_whole_read_deadline(
    cli: Cli, mirror: MirrorServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    stop = threading.Event()
    mirror.hooks.append(trickle(stop))
    monkeypatch.setenv("BACKENDMGR_TIMEOUT", "0.2")  # 10 reads' worth: 2 s for the whole
    began = time.monotonic()
    try:
        line = one_line_error(cli("releases", "llama-server", "--refresh"))
    finally:
        stop.set()
    assert time.monotonic() - began < 6
    port = mirror.server_address[1]
    assert (
        line
        == f"error: 127.0.0.1:{port} did not finish its answer within 2 s (whole-read deadline)"
    )


def test_document_deadline_scales_with_the_timeout_setting() -> None:
    assert NetSettings.from_env({}).document_deadline == 300.0
    assert NetSettings.from_env({"BACKENDMGR_TIMEOUT": "3"}).document_deadline == 30.0
