"""Helpers every command uses: shared flags and rendering of an :class:`Outcome`."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ...results import Outcome
    from ..render import Renderer


def add_no_generate(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--no-generate", action="store_true", help="do not regenerate the llama-swap config"
    )


def report(out: Renderer, outcome: Outcome) -> int:
    for warning in outcome.warnings:
        out.warning(warning)
    if out.json_mode:
        # the warnings printed on stderr, also in the document for scripts (only when any)
        extra = {"warnings": list(outcome.warnings)} if outcome.warnings else {}
        out.document({**outcome.data, **extra})
    else:
        out.info(outcome.message)
    return 0
