"""The builds' changes: ``install``, ``activate``, ``uninstall`` (the catalog's results,
which an install does not make, are in :mod:`.catalog`)."""

from __future__ import annotations

from dataclasses import dataclass

# imported at run time, not only for mypy: pydantic resolves it for the OpenAPI schemas
from ..catalog.capabilities import Capabilities
from ..results import Outcome, Result
from ._shared import Previewed

__all__ = [
    "ActivateResult",
    "AssetInfo",
    "BuildOutcome",
    "InstallResult",
    "UninstallResult",
]


@dataclass(kw_only=True, repr=False, eq=False)
class AssetInfo(Result):
    """One downloaded (or, in a dry run, chosen) asset and how its bytes were checked."""

    name: str
    url: str
    size: int | None
    sha256: str | None
    verified_by: str | None


@dataclass(kw_only=True, repr=False, eq=False)
class BuildOutcome(Outcome):
    """What installing or activating a build says about it: the build and whether it is active."""

    id: str
    component: str
    version: str
    variant: str
    path: str
    activated: bool


@dataclass(kw_only=True, repr=False, eq=False)
class InstallResult(BuildOutcome):
    already_installed: bool
    assets: list[AssetInfo]
    python: str | None = None
    packages: dict[str, str] | None = None  # a venv build's distributions, name -> version
    capabilities: Capabilities | None = None  # what its --help listed (archive and venv builds)
    # a dry run says where and what it would install
    dry_run: bool | None = None
    dir: str | None = None
    release: str | None = None
    installer: str | None = None
    requirement: str | None = None
    pip_args: list[str] | None = None
    requires_python: str | None = None  # a venv build: the package's own Requires-Python
    interpreter: str | None = None  # the interpreter its venv is (or would be) made from


@dataclass(kw_only=True, repr=False, eq=False)
class ActivateResult(BuildOutcome, Previewed):
    """The build that is now (or already was) its component's active one."""


@dataclass(kw_only=True, repr=False, eq=False)
class UninstallResult(Previewed):
    id: str | None
    ids: list[str]
    removed: bool
    rows_removed: list[str]
    models_fall_back: list[str]
