"""``activate`` and ``pin`` as every caller makes them (the façade, the canary): a switch of
the build a model runs, refused when it would drop a flag the model uses (issue 32)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

from .._inline import in_thread
from ..immutable import frozen
from .facts import find_build
from .flags import check_switch, followers, pin_target, unpin_lines

if TYPE_CHECKING:
    from ..api_models import ActivateResult, PinResult
    from ..config.models import Settings
    from ..install.builds import BuildStore
    from ..requests import ActivateRequest, PinRequest, UnpinRequest
    from ..results import Outcome
    from .activate import Activation
    from .models import Models
    from .registry import Registry

__all__ = ["Switches"]


@frozen
class Switches:
    """``activate`` and ``pin``/``unpin`` with the flag check a switch of builds needs."""

    builds: BuildStore
    settings: Callable[[], Awaitable[Settings]]
    models: Models
    registry: Registry
    # made when ``activate`` runs: a pin loads neither the activation service nor the
    # versions' ordering it sorts builds by (``packaging``)
    activation: Callable[[], Activation]

    async def activate(self, req: ActivateRequest) -> ActivateResult:
        """Switch the activated build; refused when a model following it uses a flag the build
        does not list, unless ``force``."""
        entry = find_build(self.builds, req.build)
        plan = await self.models.plan()
        models = followers(plan, entry.receipt.component)
        kept = check_switch(plan.settings, models, entry, force=req.force)
        result = await self.activation().activate(req)
        return _warned(result, kept)

    async def pin(self, req: PinRequest) -> PinResult:
        """Pin the model to the row; a build that does not list a flag of the model's
        ``extra_args`` refuses it, unless ``force`` (a component row's activated build too:
        ``pin chat llama-server`` switches builds as well)."""
        settings = await self.settings()
        entry = pin_target(settings, self.builds, req.row)
        kept = check_switch(settings, [req.model], entry, force=req.force) if entry else []
        result = await self.registry.pin(req)
        return _warned(result, kept)

    async def unpin(self, req: UnpinRequest) -> PinResult:
        """Unpin the model; a flag the build it then runs does not list is a warning (a model
        with no ``extra_args`` has no flag to check: nothing is planned for it)."""
        settings = await self.settings()
        kept: list[str] = []
        if settings.override(req.model).extra_args:
            lines = (settings, self.models.pipeline, self.builds, req.model)
            kept = await in_thread(unpin_lines, *lines)
        result = await self.registry.unpin(req)
        return _warned(result, kept)


R = TypeVar("R", bound="Outcome")


def _warned(result: R, kept: list[str]) -> R:
    """``result`` with the flag check's warnings before its own."""
    if kept:
        result.warnings = [*kept, *result.warnings]
    return result
