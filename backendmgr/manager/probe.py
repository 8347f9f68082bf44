"""The one GPU probe of a Manager: this machine's adapters and its card's memory, each probed
once, on first use, and handed to the services that plan, install or measure for this machine.

Probes are what run ``nvidia-smi``, ``rocm-smi`` or read ``/sys``: :func:`catalog.host.detect_host`
(the adapters, OS and architecture) and :func:`vram.probe_card_gb` (the card's total memory).
What they return is then worked on by pure code (``emit/devices``, ``emit/sizing``);
``measure/memory`` reads a running server's memory, which is a measurement, not this probe.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from ..immutable import frozen

if TYPE_CHECKING:
    from ..catalog.host import Host
    from ..install.builds import BuildStore

__all__ = ["GpuProbe", "Site"]


class GpuProbe:
    """``host`` and ``card_gb``, each probed once (one Manager per CLI process); ``host`` and
    ``vram`` given (tests, embedders) stand in for the probing."""

    def __init__(
        self,
        environ: Mapping[str, str],
        *,
        host: Host | None = None,
        vram: Callable[[], float | None] | None = None,
    ) -> None:
        self._environ = environ
        self._host = host
        self._vram = vram
        self._card: tuple[float | None] | None = None

    @property
    def host(self) -> Host:
        if self._host is None:
            from ..catalog.host import detect_host

            self._host = detect_host(self._environ)
        return self._host

    @property
    def card_gb(self) -> float | None:
        """The GPU's total memory in GiB (None: no reading)."""
        if self._card is None:
            from ..vram import probe_card_gb

            self._card = ((self._vram or (lambda: probe_card_gb(self._environ)))(),)
        return self._card[0]

    def platform(self, platform: str | None) -> tuple[str, str]:
        """(os, arch): ``platform`` parsed, else this machine's."""
        if platform:
            from ..catalog.host import parse_platform

            return parse_platform(platform)
        return self.host.os, self.host.arch


@frozen
class Site:
    """Where a figure is measured (:class:`..measure.tuned.Place`): the builds, the environment
    their fingerprints read, and the probe's device."""

    builds: BuildStore
    environ: dict[str, str]
    probe: GpuProbe

    @property
    def host(self) -> Host:
        return self.probe.host

    @property
    def card_gb(self) -> float | None:
        return self.probe.card_gb
