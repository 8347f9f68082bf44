"""``config path|show``: where every file lives, and the settings with their defaults (apart
from ``which``'s result, so that ``which`` makes no class it does not return)."""

from __future__ import annotations

from dataclasses import dataclass, field

# imported at run time, not only for mypy: pydantic resolves it for the OpenAPI schemas
from ..config.models import Settings
from ..results import EVERY, Result

__all__ = ["ConfigInfo"]


@dataclass(kw_only=True, repr=False, eq=False)
class ConfigInfo(Result):
    config: str
    config_exists: bool
    output: str
    home: str
    builds: str
    downloads: str
    cache: str
    manifests: str
    # the config with every default filled in: all of them, defaults included (EVERY)
    settings: Settings | None = field(default=None, metadata=EVERY)
