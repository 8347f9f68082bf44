"""Progress events moved to the public contract (:mod:`backendmgr.events`); kept importable
here for the modules that still name this path."""

from __future__ import annotations

from ..events import EventSink, Phase, ProgressEvent

__all__ = ["EventSink", "Phase", "ProgressEvent"]
