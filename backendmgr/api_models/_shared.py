"""What several groups' results share: :class:`Previewed`, the base of a change ``--dry-run``
can preview (``activate``, ``uninstall``, ``pin``, ``set``, ``models add-dir`` …)."""

from __future__ import annotations

from dataclasses import dataclass

from ..results import Outcome

__all__ = ["Previewed"]


@dataclass(kw_only=True, repr=False, eq=False)
class Previewed(Outcome):
    """A change ``--dry-run`` can preview (issue 29): run up to the write, nothing written;
    ``changed`` is what the real run would report, ``diff`` the config file's unified diff."""

    dry_run: bool | None = None
    diff: str | None = None
