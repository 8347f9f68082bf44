"""The llama-swap config: ``generate`` and the page's view of the file on disk."""

from __future__ import annotations

from dataclasses import dataclass

from ..results import Outcome, Result

__all__ = ["GenerateResult", "GeneratedText", "SkippedModel"]


@dataclass(kw_only=True, repr=False, eq=False)
class SkippedModel(Result):
    """A model the generated file leaves out, and why."""

    id: str
    reason: str


@dataclass(kw_only=True, repr=False, eq=False)
class GenerateResult(Outcome):
    """``generate`` and every change's rewrite: the file, whether it was written, and which
    models it holds, leaves out and changed."""

    output: str
    written: bool
    models: int
    skipped: list[SkippedModel]
    backup: str | None = None
    models_changed: list[str] | None = None  # ids whose entries a rewrite changed (issue 33)


@dataclass(kw_only=True, repr=False, eq=False)
class GeneratedText(Result):
    """The llama-swap config as it is on disk, and whether it is valid and up to date."""

    output: str
    exists: bool
    text: str
    valid: bool
    problems: list[str]
    up_to_date: bool
    status: str
