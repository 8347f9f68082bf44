"""What each operation takes: one typed request per operation, its limits declared once.

The CLI builds a request from its arguments (its argparse types check the same
:mod:`backendmgr.limits`), the HTTP API from the JSON body (the field names are the API's),
and the Manager takes it. A value out of range gets the same words everywhere:
``must be 1 or more, not 0``.
"""

from __future__ import annotations

from typing import Annotated, Any, Self

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic_core import PydanticCustomError

from .limits import (
    BENCH_PROMPT,
    BENCH_REPEAT,
    BENCH_TOKENS,
    CANARY_TOLERANCE,
    PRUNE_KEEP,
    RELEASES_LIMIT,
    VERIFY_TIMEOUT_S,
    Bounds,
)

__all__ = [
    "MAX_BUILDS",
    "MAX_COMPONENTS",
    "MAX_MODELS",
    "PRUNE_KEEP",
    "RELEASES_LIMIT",
    "VERIFY_TIMEOUT_S",
    "ActivateRequest",
    "AddBackendRequest",
    "CacheCleanRequest",
    "CanaryRequest",
    "DoctorRequest",
    "GenerateRequest",
    "InstallRequest",
    "PinRequest",
    "PruneRequest",
    "ReleasesQuery",
    "Request",
    "SetRequest",
    "SyncRequest",
    "UninstallRequest",
    "UnsetRequest",
    "UpdateRequest",
    "VerifyRequest",
]

MAX_BUILDS = 100
MAX_COMPONENTS = 100
MAX_MODELS = 1000


def _within(bounds: Bounds) -> Any:
    def check(value: float) -> float:
        problem = bounds.problem(value)
        if problem is not None:
            raise PydanticCustomError("out_of_range", problem)
        return value

    return AfterValidator(check)


Limit = Annotated[
    int, _within(RELEASES_LIMIT), Field(json_schema_extra=RELEASES_LIMIT.json_schema())
]
Keep = Annotated[int, _within(PRUNE_KEEP), Field(json_schema_extra=PRUNE_KEEP.json_schema())]
Seconds = Annotated[
    float,
    Field(json_schema_extra=VERIFY_TIMEOUT_S.json_schema()),
    _within(VERIFY_TIMEOUT_S),
]
Component = Annotated[str, Field(min_length=1, max_length=200)]


class Request(BaseModel):
    """A request refuses keys it does not name: a misspelt option is an error, not ignored."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    @classmethod
    def of(cls, **fields: Any) -> Self:
        """The request from keyword values; a value it refuses is a usage error (exit 2, HTTP
        422) in one line."""
        from .errors import UsageError, validation_problem

        try:
            return cls.model_validate(fields)
        except ValidationError as exc:
            raise UsageError(validation_problem(exc).input_line()) from None


# --- builds -----------------------------------------------------------------------------


class ReleasesQuery(Request):
    component: Component
    variant: str | None = Field(default=None, max_length=100)
    refresh: bool = False
    limit: Limit = 10
    platform: str | None = Field(default=None, max_length=100)


class InstallRequest(Request):
    """``dry_run`` and ``platform`` plan without installing (``platform`` needs ``dry_run``)."""

    component: Component
    version: str | None = None  # its length and characters: ``tag_problem``, as a listing's

    @field_validator("version")
    @classmethod
    def _usable_tag(cls, value: str | None) -> str | None:
        """A version no release may carry (a newline, a bidi override) is refused before
        anything starts, with the reason the release listing gives."""
        from .sources.models import tag_problem

        problem = tag_problem(value) if value is not None else None
        if problem is not None:
            raise ValueError(problem)
        return value

    variant: str | None = Field(default=None, max_length=100)
    activate: bool = False
    reinstall: bool = False
    require_checksum: bool = False
    smoke: bool = True
    refresh: bool = False
    generate: bool = True
    dry_run: bool = False
    platform: str | None = Field(default=None, max_length=100)


class UninstallRequest(Request):
    builds: list[str] = Field(min_length=1, max_length=MAX_BUILDS)
    force: bool = False
    generate: bool = True
    dry_run: bool = False  # every check, then the plan and the config's diff; nothing removed


class ActivateRequest(Request):
    build: str = Field(min_length=1, max_length=300)
    generate: bool = True
    dry_run: bool = False
    force: bool = False  # switch even when a model's extra_args uses a flag the build lacks


class UpdateRequest(Request):
    components: list[str] = Field(default_factory=list, max_length=MAX_COMPONENTS)
    dry_run: bool = False
    generate: bool = True
    force: bool = False  # activate even when a model's extra_args uses a flag the build lacks


class PruneRequest(Request):
    component: str | None = Field(default=None, max_length=200)
    keep: Keep = 1
    dry_run: bool = False
    generate: bool = True


class CacheCleanRequest(Request):
    dry_run: bool = False


class DoctorRequest(Request):
    fix: bool = False


# --- registry and overrides ------------------------------------------------------------


class AddBackendRequest(Request):
    """``id`` is checked by the registry's own rule (a malformed id, exit 2), not a length."""

    id: str
    kind: str = Field(max_length=100)
    path: str = Field(max_length=4096)
    name: str = Field(default="", max_length=200)
    default: bool = False
    force: bool = False
    generate: bool = True


class PinRequest(Request):
    row: str = Field(max_length=300)
    generate: bool = True


class SetRequest(Request):
    values: dict[str, str] = Field(max_length=20)
    generate: bool = True


class UnsetRequest(Request):
    keys: list[str] = Field(min_length=1, max_length=20)
    generate: bool = True


# --- models, the generated config, lock files --------------------------------------------


class GenerateRequest(Request):
    """``output`` is the CLI's ``--output``; the API writes only the configured file."""

    output: str | None = Field(default=None, max_length=4096)
    force: bool = False
    check: bool = False


class VerifyRequest(Request):
    models: list[str] = Field(default_factory=list, max_length=MAX_MODELS)
    timeout: Seconds | None = None
    keep_going: bool = False


class SyncRequest(Request):
    """``lock`` is the CLI's LOCK argument (default: beside the config file)."""

    lock: str | None = Field(default=None, max_length=4096)
    locked: bool = False
    prune: bool = False
    force: bool = False
    dry_run: bool = False


# --- canary (issue 32): its bounds are bench's and the tolerance's ----------------------

Tolerance = Annotated[
    float, _within(CANARY_TOLERANCE), Field(json_schema_extra=CANARY_TOLERANCE.json_schema())
]
Repeat = Annotated[int, _within(BENCH_REPEAT), Field(json_schema_extra=BENCH_REPEAT.json_schema())]
Words = Annotated[int, _within(BENCH_PROMPT), Field(json_schema_extra=BENCH_PROMPT.json_schema())]
Tokens = Annotated[int, _within(BENCH_TOKENS), Field(json_schema_extra=BENCH_TOKENS.json_schema())]


class CanaryRequest(Request):
    """``activate BUILD --canary MODEL…``: the build to try, its canary models, how much
    slower it may be (percent), and how each (model, build) is measured."""

    build: str = Field(min_length=1, max_length=300)
    models: list[Annotated[str, Field(min_length=1, max_length=500)]] = Field(
        min_length=1, max_length=MAX_MODELS
    )
    tolerance: Tolerance = 5.0
    repeat: Repeat = 3
    prompt_words: Words = 256
    tokens: Tokens = 64
    timeout: Seconds | None = None
