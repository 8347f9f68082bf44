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
    from ...api_models import dump

    for warning in outcome.warnings:  # on stderr, and in the --json document for scripts
        out.warning(warning)
    if out.json_mode:
        out.document(dump(outcome))
    else:
        out.info(outcome.message)
    return 0
