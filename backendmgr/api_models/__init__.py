"""Typed shapes of what the CLI's ``--json`` prints and the HTTP API returns.

The Manager's read operations return these results; the CLI's ``--json``, its tables and the
HTTP API all serialise them with :func:`dump`, and a test holds the CLI's ``--json`` to the
same classes, so the two cannot drift apart. Mutations return an :class:`Outcome` subclass,
which carries the human ``message`` beside the data. The keys are SPEC §13's; a result (a
standard-library dataclass, :class:`Result`) takes no keyword it does not name, so a misspelt
field is an error where the result is built, not a key that quietly appears.

Each group of operations has its own module (``inventory`` for ``list`` and ``backends``,
``models``, ``which``, ``builds``, ``registry`` …) and this package loads a result's module
when the result is first named: making the classes is most of an import's cost, and a
command needs its own few. Each module imports at run time every class its annotations name,
since pydantic (the OpenAPI schemas) and :func:`backendmgr.record.hints` resolve them there.
"""

from typing import TYPE_CHECKING

from ..lazy import loader

# re-exported: the bases and the document writer every caller shares, loaded at once
from ..results import EVERY as EVERY
from ..results import Outcome as Outcome
from ..results import Result as Result
from ..results import dump, extra_keys

if TYPE_CHECKING:
    from ._shared import Previewed
    from .builds import ActivateResult, AssetInfo, BuildOutcome, InstallResult, UninstallResult
    from .catalog import CatalogEntry, ReleaseInfo, VariantHere
    from .cmd import CmdResult
    from .config import ConfigInfo
    from .folders import ModelsDirResult
    from .generate import GeneratedText, GenerateResult, SkippedModel
    from .inventory import BackendRowInfo, BuildInfo
    from .lock import FetchResult, LockResult, SyncResult
    from .measure import BisectReport, CanaryReport, VerifyReport
    from .models import ModelBackend, ModelInfo, VerifyResult
    from .overrides import ModelSettingsResult
    from .pins import PinResult
    from .registry import BackendRowResult, RemovedRow
    from .upkeep import CacheCleanResult, DoctorReport, PruneResult, UpdateEntry, UpdateResult
    from .web import ErrorBody, JobInfo
    from .which import WhichResult

__all__ = [
    "ActivateResult",
    "AssetInfo",
    "BackendRowInfo",
    "BackendRowResult",
    "BisectReport",
    "BuildInfo",
    "BuildOutcome",
    "CacheCleanResult",
    "CanaryReport",
    "CatalogEntry",
    "CmdResult",
    "ConfigInfo",
    "DoctorReport",
    "ErrorBody",
    "FetchResult",
    "GenerateResult",
    "GeneratedText",
    "InstallResult",
    "JobInfo",
    "LockResult",
    "ModelBackend",
    "ModelInfo",
    "ModelSettingsResult",
    "ModelsDirResult",
    "PinResult",
    "Previewed",
    "PruneResult",
    "ReleaseInfo",
    "RemovedRow",
    "SkippedModel",
    "SyncResult",
    "UninstallResult",
    "UpdateEntry",
    "UpdateResult",
    "VariantHere",
    "VerifyReport",
    "VerifyResult",
    "WhichResult",
    "dump",
    "extra_keys",
]

_WHERE = {
    "ActivateResult": "builds",
    "AssetInfo": "builds",
    "BackendRowInfo": "inventory",
    "BackendRowResult": "registry",
    "BisectReport": "measure",
    "BuildInfo": "inventory",
    "BuildOutcome": "builds",
    "CacheCleanResult": "upkeep",
    "CanaryReport": "measure",
    "CatalogEntry": "catalog",
    "CmdResult": "cmd",
    "ConfigInfo": "config",
    "DoctorReport": "upkeep",
    "ErrorBody": "web",
    "FetchResult": "lock",
    "GenerateResult": "generate",
    "GeneratedText": "generate",
    "InstallResult": "builds",
    "JobInfo": "web",
    "LockResult": "lock",
    "ModelBackend": "models",
    "ModelInfo": "models",
    "ModelSettingsResult": "overrides",
    "ModelsDirResult": "folders",
    "PinResult": "pins",
    "Previewed": "_shared",
    "PruneResult": "upkeep",
    "ReleaseInfo": "catalog",
    "RemovedRow": "registry",
    "SkippedModel": "generate",
    "SyncResult": "lock",
    "UninstallResult": "builds",
    "UpdateEntry": "upkeep",
    "UpdateResult": "upkeep",
    "VariantHere": "catalog",
    "VerifyReport": "measure",
    "VerifyResult": "models",
    "WhichResult": "which",
}


__getattr__ = loader(__name__, _WHERE)


def __dir__() -> list[str]:
    return list(__all__)
