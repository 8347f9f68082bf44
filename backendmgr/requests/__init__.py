"""What each operation takes: one typed request per operation, every field declared once.

A request is a frozen standard-library dataclass (its base, :class:`Request`, and :class:`Arg`
are in :mod:`backendmgr.contract`). Each field carries, in its ``Annotated`` metadata, one
:class:`Arg`: its help text, how the command line gives it (an option, a
positional, its metavar) and its limits (:class:`~backendmgr.limits.Bounds`, lengths). From
that one declaration:

* the CLI's options are generated (:mod:`backendmgr.cli.options`), with the field's default;
* the request checks itself when made (``__post_init__``): each field's limits, then the
  request's cross-field :meth:`Request.rule`, raising a usage error (exit 2, HTTP 422) in the
  same words for the CLI, the API and a Python caller: ``limit: must be 1 or more, not 0``;
* the HTTP API validates JSON bodies into the same classes with pydantic
  (``__pydantic_config__`` refuses unknown keys; pydantic calls ``__post_init__``), and its
  OpenAPI schema shows each field's help and limits (:meth:`Arg.__get_pydantic_json_schema__`).

Each group of commands has its own module (``builds``, ``registry``, ``models`` …; ``install``,
``releases``, ``list``, ``which`` and the edits ``set``, ``unset``, ``pin``, ``unpin`` and
``generate`` one each, as the commands run most: every edit regenerates, with a
``GenerateRequest``)
and this package loads a request's module when the request is first named: making the classes
is most of an import's cost, and a command needs its own few. Nothing here imports pydantic.
"""

from typing import TYPE_CHECKING

from ..contract import Arg, Request, args_of
from ..lazy import loader

if TYPE_CHECKING:
    from ._shared import MAX_BUILDS, MAX_COMPONENTS, MAX_MODELS
    from .builds import ActivateRequest, DoctorRequest, UninstallRequest
    from .checks import CanaryRequest, VerifyRequest
    from .default import DefaultRequest
    from .generate import GenerateRequest
    from .install import InstallRequest
    from .listing import ListRequest
    from .lock import FetchRequest, LockRequest, SyncRequest
    from .models import CmdRequest, ModelsDirRequest
    from .overrides import SetRequest
    from .pins import PinRequest
    from .registry import AddBackendRequest, RemoveBackendRequest
    from .releases import ReleasesQuery
    from .serve import ServeRequest
    from .unpin import UnpinRequest
    from .unset import UnsetRequest
    from .upkeep import CacheCleanRequest, PruneRequest, UpdateRequest
    from .which import WhichRequest

__all__ = [
    "MAX_BUILDS",
    "MAX_COMPONENTS",
    "MAX_MODELS",
    "ActivateRequest",
    "AddBackendRequest",
    "Arg",
    "CacheCleanRequest",
    "CanaryRequest",
    "CmdRequest",
    "DefaultRequest",
    "DoctorRequest",
    "FetchRequest",
    "GenerateRequest",
    "InstallRequest",
    "ListRequest",
    "LockRequest",
    "ModelsDirRequest",
    "PinRequest",
    "PruneRequest",
    "ReleasesQuery",
    "RemoveBackendRequest",
    "Request",
    "ServeRequest",
    "SetRequest",
    "SyncRequest",
    "UninstallRequest",
    "UnpinRequest",
    "UnsetRequest",
    "UpdateRequest",
    "VerifyRequest",
    "WhichRequest",
    "args_of",
]

_WHERE = {
    "ActivateRequest": "builds",
    "AddBackendRequest": "registry",
    "CacheCleanRequest": "upkeep",
    "CanaryRequest": "checks",
    "CmdRequest": "models",
    "DefaultRequest": "default",
    "DoctorRequest": "builds",
    "FetchRequest": "lock",
    "GenerateRequest": "generate",
    "InstallRequest": "install",
    "ListRequest": "listing",
    "LockRequest": "lock",
    "MAX_BUILDS": "_shared",
    "MAX_COMPONENTS": "_shared",
    "MAX_MODELS": "_shared",
    "ModelsDirRequest": "models",
    "PinRequest": "pins",
    "PruneRequest": "upkeep",
    "ReleasesQuery": "releases",
    "RemoveBackendRequest": "registry",
    "ServeRequest": "serve",
    "SetRequest": "overrides",
    "SyncRequest": "lock",
    "UninstallRequest": "builds",
    "UnpinRequest": "unpin",
    "UnsetRequest": "unset",
    "UpdateRequest": "upkeep",
    "VerifyRequest": "checks",
    "WhichRequest": "which",
}


__getattr__ = loader(__name__, _WHERE)


def __dir__() -> list[str]:
    return list(__all__)
