"""A recognised cause of a failure as results carry it (``verify``, ``tune``, and ``models``
showing the last verify), apart from the table of causes and its classifier
(:mod:`.reasons`): a read that shows a result makes neither."""

from __future__ import annotations

from ..immutable import frozen
from ..record import Record

__all__ = ["FailureCause", "cause_text"]


@frozen(kw_only=True)
class FailureCause(Record):
    """A recognised cause, as the CLI, ``--json`` and the page show it."""

    code: str
    line: str
    fix: str | None


def cause_text(cause: FailureCause | None) -> str:
    """What a failure's one line adds for a recognised cause: ``; out-of-memory: …; fix: …``."""
    if cause is None:
        return ""
    return f"; {cause.code}: {cause.line}" + (f"; fix: {cause.fix}" if cause.fix else "")
