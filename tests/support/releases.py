"""Releases laid out the way the loopback mirror (``backendmgr.mirror``) serves them."""

from __future__ import annotations

import functools
import json
import os
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from tests.support.archives import Entry, llama_entries, make_tar

if TYPE_CHECKING:
    from backendmgr.mirror import MirrorHandler, MirrorServer

LLAMA_REPO = "ggml-org/llama.cpp"
VULKAN = "llama-{tag}-bin-ubuntu-vulkan-x64.tar.gz"
NAME = VULKAN.format(tag="b100")  # the asset most tests install

B11211_ASSETS = [
    "llama-b11211-bin-ubuntu-x64.tar.gz",
    "llama-b11211-bin-ubuntu-arm64.tar.gz",
    "llama-b11211-bin-ubuntu-vulkan-x64.tar.gz",
    "llama-b11211-bin-ubuntu-vulkan-arm64.tar.gz",
    "llama-b11211-bin-ubuntu-cuda-12.8-x64.tar.gz",
    "llama-b11211-bin-ubuntu-cuda-13.4-x64.tar.gz",
    "llama-b11211-bin-ubuntu-cuda-13.4-arm64.tar.gz",
    "llama-b11211-bin-ubuntu-rocm-10.0-x64.tar.gz",
    "llama-b11211-bin-ubuntu-sycl-fp16-x64.tar.gz",
    "llama-b11211-bin-ubuntu-openvino-2026.4-x64.tar.gz",
    "llama-b11211-bin-macos-arm64.tar.gz",
    "llama-b11211-bin-macos-x64.tar.gz",
    "llama-b11211-bin-win-cpu-x64.zip",
    "llama-b11211-bin-win-cuda-12.4-x64.zip",
    "llama-b11211-bin-win-cuda-13.4-x64.zip",
    "llama-b11211-bin-win-vulkan-x64.zip",
    "llama-b11211-bin-win-rocm-10.0-x64.zip",
    "llama-b11211-bin-win-sycl-x64.zip",
    "cudart-llama-bin-win-cuda-12.4-x64.zip",
    "cudart-llama-bin-win-cuda-13.4-x64.zip",
]

OLD_ASSETS = [
    "llama-b5000-bin-ubuntu-x64.zip",
    "llama-b5000-bin-ubuntu-vulkan-x64.zip",
    "llama-b5000-bin-win-cpu-x64.zip",
    "llama-b5000-bin-win-hip-radeon-x64.zip",
    "llama-b5000-bin-win-vulkan-x64.zip",
    "llama-b5000-bin-win-cuda-12.4-x64.zip",
    "cudart-llama-bin-win-cuda-12.4-x64.zip",
    "llama-b5000-bin-macos-arm64.zip",
]


def publish(
    root: Path,
    repo: str,
    tag: str,
    assets: dict[str, bytes],
    *,
    published_at: str | None = None,
    prerelease: bool = False,
) -> Path:
    """Lay out one release the way the mirror serves it."""
    folder = root / repo / tag
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in assets.items():
        (folder / name).write_bytes(data)
    meta = {"prerelease": prerelease}
    if published_at:
        meta["published_at"] = published_at
    (folder / ".release.json").write_text(json.dumps(meta))
    return folder


def publish_llama(
    root: Path,
    tag: str,
    variants: Iterable[str] = ("vulkan",),
    *,
    published_at: str | None = None,
    fail: bool = False,
    help_text: str | None = None,
    devices: str | None = None,
) -> dict[str, bytes]:
    """Release ``tag`` of llama.cpp with Linux x64 tarballs for the given variants (``help_text``
    and ``devices``: what its ``--help`` and ``--list-devices`` print)."""
    names = {
        "cpu": f"llama-{tag}-bin-ubuntu-x64.tar.gz",
        "vulkan": f"llama-{tag}-bin-ubuntu-vulkan-x64.tar.gz",
        "rocm": f"llama-{tag}-bin-ubuntu-rocm-10.0-x64.tar.gz",
        "cuda": f"llama-{tag}-bin-ubuntu-cuda-13.4-x64.tar.gz",
    }
    entries = llama_entries(tag, fail=fail, help_text=help_text, devices=devices)
    assets = {names[v]: make_tar(entries) for v in variants}
    publish(root, LLAMA_REPO, tag, assets, published_at=published_at)
    return assets


@functools.lru_cache(maxsize=16)
def _big_archive(tag: str, script: bytes | None, size: int) -> bytes:
    """Built once per session: compressing megabytes of random bytes is the slow part, and no
    test depends on which random bytes they are."""
    entries = [*llama_entries(tag), Entry("build/bin/blob.bin", os.urandom(size))]
    if script is not None:
        entries = [
            Entry(e.name, script, mode=0o755) if e.name.endswith("/llama-server") else e
            for e in entries
        ]
    return make_tar(entries)


def big_release(
    root: Path,
    tag: str = "b100",
    *,
    script: bytes | None = None,
    size: int = 3 << 20,
) -> bytes:
    """A vulkan build of ``tag`` with ``size`` random bytes (they do not compress), so that a
    throttled download takes a while and a cut one can be cut half way; ``script`` replaces
    the llama-server stand-in."""
    data = _big_archive(tag, script, size)
    publish(root, LLAMA_REPO, tag, {VULKAN.format(tag=tag): data})
    return data


class DownloadGates:
    """Holds every asset download of a release at the mirror until the test opens its tag's
    gate: which install finishes first is the test's choice, not the machine's load."""

    def __init__(self, server: MirrorServer, tags: Iterable[str]) -> None:
        self.gates = {tag: threading.Event() for tag in tags}
        self.arrived: list[str] = []  # tags, in the order their downloads reached the mirror
        self._lock = threading.Lock()
        server.hooks.append(self._hold)

    def _hold(self, handler: MirrorHandler) -> bool:
        parts = handler.route.split("/")  # /download/<owner>/<repo>/<tag>/<asset>
        if len(parts) == 6 and parts[1] == "download" and parts[4] in self.gates:
            with self._lock:
                self.arrived.append(parts[4])
            self.gates[parts[4]].wait(120)
        return False

    def began(self, n: int = 1) -> list[str]:
        """The first ``n`` tags whose downloads arrived, once that many have (else none)."""
        with self._lock:
            return self.arrived[:n] if len(self.arrived) >= n else []

    def open(self, *tags: str) -> None:
        for tag in tags or tuple(self.gates):
            self.gates[tag].set()
