"""``cmd``: the command line one model gets (apart from ``models``' results, so that each
makes only its own classes)."""

from __future__ import annotations

from dataclasses import dataclass

from ..results import Result

__all__ = ["CmdResult"]


@dataclass(kw_only=True, repr=False, eq=False)
class CmdResult(Result):
    id: str
    argv: list[str]

    def shell_line(self) -> str:
        """The command as a POSIX shell reads it; llama-swap macros like ``${PORT}`` stay."""
        from ..emit.plan import render_token

        return " ".join(render_token(t) for t in self.argv)
