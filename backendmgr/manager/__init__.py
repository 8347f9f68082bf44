"""The async service layer: every operation the CLI (or a web UI) can ask for.

Each mutation is one locked read-modify-write of the config file, run in a worker thread so
the event loop stays free, and ends by regenerating the llama-swap config unless told not to.
The operations are grouped by what they touch: ``_registry`` (rows and per-model overrides),
``_builds`` (install, activate, uninstall, list, doctor) and ``_models`` (discovery and the
generated config), ``_maintenance`` (update, prune, cache clean, which, config, uninstall);
``_base`` holds what they share.
"""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING

from ._base import ManagerBase
from ._builds import BuildsMixin
from ._lock import LockMixin
from ._maintenance import MaintenanceMixin
from ._models import ModelsMixin
from ._registry import SETTABLE_KEYS, RegistryMixin, row_json
from ._verify import VerifyMixin

if TYPE_CHECKING:
    from .measure import MeasureService
    from .swap import SwapService

__all__ = ["SETTABLE_KEYS", "Manager", "ManagerBase", "row_json"]


class Manager(LockMixin, VerifyMixin, MaintenanceMixin, ModelsMixin, BuildsMixin, RegistryMixin):
    """One config file and one data home; the object every front end drives.

    >>> from backendmgr.config.paths import Paths
    >>> mgr = Manager(Paths.resolve(config="/tmp/c.yaml", home="/tmp/h"))
    """

    @property
    def measure(self) -> MeasureService:  # issue 22: verify --repair and tune
        from .measure import MeasureService

        return MeasureService.of(self)

    @cached_property
    def swap(self) -> SwapService:
        """llama-swap itself: ``up``, the service, ``status``, the reload proof (issue 21)."""
        from .swap import SwapService

        return SwapService(
            self.paths,
            settings=self.settings,
            output_path=self.output_path,
            generate=self.generate,
            environ=self.environ,
        )
