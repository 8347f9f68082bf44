"""The cycle collector's thresholds: raised for a command's short process, Python's own for
the commands that run for hours in it.

A command lives well under a second and leaves without the interpreter's teardown
(:func:`backendmgr.__main__.leave`): the few cycles it makes (exception tracebacks, ruamel's
node tree, dataclass machinery) would be freed by the exit anyway. With Python's thresholds
the collector runs every 700 allocations, and every hundred runs walks every live object (each
imported module, a parsed config, a 200-model document): 14-20 % of the CPU of a rewrite of the
llama-swap config. The raised thresholds still bound memory (a collection every 100 000 net
allocations). ``serve`` and ``up`` run for hours, their garbage in steady small steps
(requests, log lines), where Python's own thresholds are right.
"""

from __future__ import annotations

import gc

__all__ = ["SHORT_LIVED", "USUAL", "collect_as_usual", "short_lived"]

SHORT_LIVED = (100_000, 50, 1000)
"""The thresholds while a command runs."""
USUAL = gc.get_threshold()
"""The interpreter's own, as this module is first imported (before :func:`short_lived`): they
differ between Python versions."""


def short_lived() -> None:
    """For the command's process, as it starts."""
    gc.set_threshold(*SHORT_LIVED)


def collect_as_usual() -> None:
    """For a command that runs for hours (``serve``, ``up``), before it settles in."""
    gc.set_threshold(*USUAL)
