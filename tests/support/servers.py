"""Loopback servers that stop at once.

``socketserver``'s ``serve_forever`` looks for a shutdown request between polls of 0.5 s by
default, so each ``shutdown()`` waited up to half a second: about 0.5 s per test that served a
mirror, hundreds of them. Polling every 10 ms ends the loop at once; requests are served as
before (a poll only bounds how long an idle loop sleeps)."""

from __future__ import annotations

from pathlib import Path

from backendmgr.mirror import MirrorServer

POLL_S = 0.01


class Mirror(MirrorServer):
    """The product's loopback mirror, whose ``stop()`` returns within ``POLL_S``."""

    def serve_forever(self, poll_interval: float = POLL_S) -> None:
        super().serve_forever(poll_interval)


def start_mirror(root: Path) -> MirrorServer:
    """A started :class:`Mirror` over ``root``."""
    return Mirror(root).start()
