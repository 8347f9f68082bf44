"""One module per command (or command pair); each adds its parser and an async handler."""

from __future__ import annotations

import argparse
from typing import Any

from . import (
    backends,
    builds,
    completion,
    lock,
    maintenance,
    models,
    overrides,
    pin,
    serve,
    swap,
    tune,
    verify,
)

__all__ = ["register"]


def register(sub: argparse._SubParsersAction[Any]) -> None:
    for module in (builds, backends, pin, overrides, models):
        module.register(sub)
    for extra in (maintenance, lock, completion, verify, tune, swap):
        extra.register(sub)
    serve.register(sub)
