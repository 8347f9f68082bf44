"""The API's request bodies, together in one place: each operation's JSON body with its bounds
(the OpenAPI document names them). Unknown keys are refused."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ..sources.models import tag_problem

__all__ = [
    "AddBackendRequest",
    "Body",
    "CacheCleanRequest",
    "DoctorRequest",
    "GenerateFlag",
    "GenerateRequest",
    "InstallRequest",
    "PinRequest",
    "PruneRequest",
    "SetRequest",
    "SyncRequest",
    "UninstallRequest",
    "UnsetRequest",
    "UpdateRequest",
    "VerifyRequest",
]


class Body(BaseModel):
    """A request body: unknown keys are an error, not ignored."""

    model_config = ConfigDict(extra="forbid")


class InstallRequest(Body):
    component: str = Field(min_length=1, max_length=200)
    version: str | None = Field(default=None, max_length=200)

    @field_validator("version")
    @classmethod
    def _usable_tag(cls, value: str | None) -> str | None:
        """A version no release may carry (a newline, a bidi override) is refused before a
        job starts, with the reason the CLI gives."""
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


class UninstallRequest(Body):
    builds: list[str] = Field(min_length=1, max_length=100)
    force: bool = False
    generate: bool = True


class GenerateFlag(Body):
    generate: bool = True


class AddBackendRequest(Body):
    id: str = Field(max_length=200)
    kind: str = Field(max_length=100)
    path: str = Field(max_length=4096)
    name: str = Field(default="", max_length=200)
    default: bool = False
    force: bool = False
    generate: bool = True


class PinRequest(Body):
    row: str = Field(max_length=300)
    generate: bool = True


class SetRequest(Body):
    values: dict[str, str] = Field(max_length=20)
    generate: bool = True


class UnsetRequest(Body):
    keys: list[str] = Field(min_length=1, max_length=20)
    generate: bool = True


class GenerateRequest(Body):
    """No ``output``: the API writes only the configured file (``--output`` stays CLI-only)."""

    force: bool = False
    check: bool = False


class UpdateRequest(Body):
    components: list[str] = Field(default_factory=list, max_length=100)
    dry_run: bool = False
    generate: bool = True


class SyncRequest(Body):
    locked: bool = False
    prune: bool = False
    force: bool = False
    dry_run: bool = False


class VerifyRequest(Body):
    models: list[str] = Field(default_factory=list, max_length=1000)
    timeout: float | None = Field(default=None, gt=0, le=3600)
    keep_going: bool = False


class PruneRequest(Body):
    component: str | None = Field(default=None, max_length=200)
    keep: int = Field(default=1, ge=0, le=1000)
    dry_run: bool = False
    generate: bool = True


class CacheCleanRequest(Body):
    dry_run: bool = False


class DoctorRequest(Body):
    fix: bool = False
