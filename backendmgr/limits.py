"""The bounds of every operation's numeric inputs, declared once: the requests
(:mod:`backendmgr.requests`) check them, and the CLI's argparse types use the same bounds and
words without loading pydantic (``--help`` and <TAB> stay fast)."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable  # loaded with argparse anyway (re → functools)

__all__ = [
    "BENCH_PROMPT",
    "BENCH_REPEAT",
    "BENCH_TOKENS",
    "CANARY_TOLERANCE",
    "PORT",
    "PRUNE_KEEP",
    "RELEASES_LIMIT",
    "TUNE_ATTEMPTS",
    "TUNE_BUDGET_GB",
    "TUNE_DEADLINE_DEFAULT_S",
    "TUNE_DEADLINE_S",
    "VERIFY_TIMEOUT_S",
    "Bounds",
    "first_problem",
]


class Bounds:
    """A closed (or, with ``above``, left-open) range; a plain class, since ``dataclasses``
    would cost every command that parses a bounded option its start-up."""

    __slots__ = ("above", "high", "low", "unit", "whole")

    def __init__(
        self, low: float, high: float, above: bool = False, unit: str = "", whole: bool = True
    ) -> None:
        self.low, self.high = low, high
        self.above = above  # the low bound itself is refused
        self.unit, self.whole = unit, whole

    def problem(self, value: float) -> str | None:
        """Why ``value`` is out of bounds, in the words the CLI and the API both use."""
        if math.isnan(value):
            return "must be a number, not nan"
        shown = f"{value:g}{self.unit}"
        if value <= self.low if self.above else value < self.low:
            if self.above:
                return f"must be more than {self.low:g}{self.unit}, not {shown}"
            return f"must be {self.low:g}{self.unit} or more, not {shown}"
        if value > self.high:
            return f"must be at most {self.high:g}{self.unit}, not {shown}"
        return None

    def json_schema(self) -> dict[str, float]:
        return {"exclusiveMinimum" if self.above else "minimum": self.low, "maximum": self.high}

    def argument(self) -> Callable[[str], float]:
        """An argparse ``type=``: the number, or a usage error in these words."""

        def parse(text: str) -> float:
            try:
                value: float = int(text) if self.whole else float(text)
            except ValueError:
                what = "a whole number" if self.whole else "a number"
                raise argparse.ArgumentTypeError(f'"{text}" is not {what}') from None
            problem = self.problem(value)
            if problem is not None:
                raise argparse.ArgumentTypeError(problem)
            return value

        return parse


def first_problem(*checks: tuple[str, float | None, Bounds]) -> str | None:
    """``--flag problem`` for the first (flag, value, bounds) out of bounds; None values pass."""
    for flag, value, bounds in checks:
        problem = None if value is None else bounds.problem(value)
        if problem is not None:
            return f"{flag} {problem}"
    return None


RELEASES_LIMIT = Bounds(1, 100)
"""``releases --limit``: 1 to 100 (the API's bound; the Manager had none, the CLI no top)."""
PRUNE_KEEP = Bounds(0, 1000)
"""``prune --keep``: 0 to 1000 (the API's cap; the CLI and the Manager had no top)."""
VERIFY_TIMEOUT_S = Bounds(0, 24 * 3600, above=True, unit=" s", whole=False)
"""``verify --timeout``: more than 0, at most a day (the CLI's and the Manager's bound; the
API allowed an hour, less than a large vLLM model's first load can take)."""
TUNE_BUDGET_GB = Bounds(0, 1 << 20, above=True, unit=" GiB", whole=False)
"""``tune --budget``: the memory a tuned context may use, more than 0 GiB."""
TUNE_DEADLINE_S = Bounds(0, 7 * 24 * 3600, above=True, unit=" s", whole=False)
"""``tune --deadline``: the whole run's seconds, every start included; more than 0, a week."""
TUNE_DEADLINE_DEFAULT_S = 3600.0
"""``tune``'s deadline when none is given: 8 starts of a large model fit, a hang does not."""
TUNE_ATTEMPTS = Bounds(1, 64)
"""``tune --max-attempts``: starts per model; 8 halvings settle any context from 4096 to 1M."""
BENCH_REPEAT = Bounds(1, 100)
"""``bench --repeat``: runs per model and build; the median and spread are over them."""
BENCH_PROMPT = Bounds(1, 32768)
"""``bench --prompt``: words of the fixed prompt (about one token each)."""
BENCH_TOKENS = Bounds(1, 8192)
"""``bench --tokens``: tokens generated per run."""
CANARY_TOLERANCE = Bounds(0, 100, unit=" %", whole=False)
"""``--canary --tolerance``: how much slower (percent) the new build may be and still promote."""
PORT = Bounds(0, 65535)
"""``serve --port``: a TCP port; 0 asks the system for a free one."""
TOKEN_CHARS = (16, 512)
"""``serve --token``: the secret's length (it goes into URLs and cookies as it is)."""
