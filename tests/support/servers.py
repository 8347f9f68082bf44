"""Loopback servers that stop at once.

``socketserver``'s ``serve_forever`` looks for a shutdown request between polls of 0.5 s by
default, so each ``shutdown()`` waited up to half a second: about 0.5 s per test that served a
mirror, hundreds of them. The product's :meth:`MirrorServer.start` polls every 10 ms; the
tests' own plain servers use :data:`POLL_S` for the same."""

from __future__ import annotations

from pathlib import Path

from backendmgr.mirror import POLL_S, MirrorServer

__all__ = ["POLL_S", "start_mirror"]


def start_mirror(root: Path) -> MirrorServer:
    """A started mirror over ``root``."""
    return MirrorServer(root).start()
