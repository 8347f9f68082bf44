"""Typed shape of the config file (SPEC §2): settings, registry rows, per-model overrides.

Models are frozen: the registry rules return new lists instead of editing rows in place, and
the store turns the result back into a minimal edit of the user's YAML.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ..discovery.models import unsafe_char
from ..errors import escaped

__all__ = [
    "MAX_ID_CHARS",
    "MAX_ROW_ID_CHARS",
    "BackendRow",
    "ModelOverride",
    "Settings",
    "id_problem",
    "row_id_problem",
    "shown",
]

MAX_ID_CHARS = 1024
"""Longest model id or row id kept. Discovery builds a model id from a file name (at most 255),
``-``, the parent folder's name (at most 255) and a ``-N`` counter; a build row id is a
component, a release tag and a variant. 1024 holds all of those and still bounds the file."""

MAX_ROW_ID_CHARS = 128
"""Longest id of a row typed in by hand (``backends add``): a name to read, type and pin."""


def shown(value: str, limit: int = 60) -> str:
    """``value`` quoted for a one-line message: unprintable characters escaped, long text cut."""
    return f'"{escaped(value, limit)}"'


def id_problem(value: str, what: str, limit: int = MAX_ID_CHARS) -> str | None:
    """Why ``value`` cannot be any id, or None: blank, too long, or a character (control,
    format, line separator) that could break the YAML, a terminal line or a command line.
    The character test is discovery's, so a model id it would skip is refused here too."""
    if not value.strip():
        return f"{what} must not be blank"
    if len(value) > limit:
        return f"{what} {shown(value, 40)} is {len(value)} characters long; the most is {limit}"
    bad = unsafe_char(value)
    if bad is not None:
        return f"{what} {shown(value)} holds control character {bad}; use printable characters"
    return None


def row_id_problem(value: str, limit: int = MAX_ROW_ID_CHARS) -> str | None:
    """Why ``value`` cannot name a manual or managed row: :func:`id_problem`, and no ``/``,
    ``\\``, ``.`` or ``..``, because the web API puts a row id in one path segment."""
    problem = id_problem(value, "row id", limit)
    if problem is not None:
        return problem
    if "/" in value or "\\" in value:
        return f'row id {shown(value)} may not contain "/" or "\\"; use letters, digits, "-", "_"'
    if value.strip() in (".", ".."):
        return f'row id {shown(value)} is not a name; use letters, digits, "-", "_"'
    return None


class _Frozen(BaseModel):
    model_config = ConfigDict(defer_build=True, extra="forbid", frozen=True, strict=False)


class BackendRow(_Frozen):
    """One registry row: an executable that can serve the classes of its ``kind``."""

    id: str
    kind: str = ""
    name: str = ""
    path: str
    default: bool = False
    managed: bool = False
    component: str = ""
    version: str = ""
    variant: str = ""
    build: bool = False

    @field_validator("id")
    @classmethod
    def _id_is_safe(cls, value: str) -> str:
        problem = id_problem(value, "row id")
        if problem is not None:
            raise ValueError(problem)
        return value

    @model_validator(mode="after")
    def _manual_id_is_a_name(self) -> BackendRow:
        """A hand-made row's id meets the ``backends add`` rule; installer rows are named by
        their component and release tag, which the installer checks."""
        if not self.managed and not self.build:
            problem = row_id_problem(self.id)
            if problem is not None:
                raise ValueError(problem)
        return self

    @field_validator("path")
    @classmethod
    def _path_not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("path must not be blank")
        return value

    def to_yaml(self) -> dict[str, Any]:
        """The fields worth writing: empty strings and false flags are left out of the file."""
        out: dict[str, Any] = {"id": self.id}
        for key in ("kind", "name", "path"):
            value = getattr(self, key)
            if value:
                out[key] = value
        for key in ("default", "managed"):
            if getattr(self, key):
                out[key] = True
        for key in ("component", "version", "variant"):
            value = getattr(self, key)
            if value:
                out[key] = value
        if self.build:
            out["build"] = True
        return out


class ModelOverride(_Frozen):
    """Per-model settings for every backend kind; each emitter reads only its own fields."""

    backend: str | None = None
    ctx: int | None = Field(default=None, gt=0)
    vram_target_gb: float | None = Field(default=None, gt=0)
    vllm_gpu_util: float | None = Field(default=None, gt=0, le=1)
    vllm_tensor_parallel: int | None = Field(default=None, ge=1)
    vllm_tokenizer: str | None = None
    vllm_tool_parser: str | None = None
    extra_args: str | None = None
    unlisted: bool | None = None
    llama_swap: dict[str, Any] | None = None

    @field_validator("extra_args")
    @classmethod
    def _extra_args_split(cls, value: str | None) -> str | None:
        """Split like shell words now, so a bad quote is refused here, not later in ``cmd``."""
        if value is not None:
            import shlex

            try:
                shlex.split(value)
            except ValueError as exc:
                raise ValueError(
                    f"{str(exc).lower()} in {value!r}; quote it as a shell would"
                ) from None
        return value

    def to_yaml(self) -> dict[str, Any]:
        return self.model_dump(exclude_none=True)

    def is_empty(self) -> bool:
        return not self.to_yaml()


class Settings(_Frozen):
    """The whole config file. A missing file is ``Settings()``."""

    models_dirs: list[str] = Field(default_factory=list)
    output: str | None = None
    vram_budget_gb: float | None = Field(default=None, gt=0)
    server_exe: str = "llama-server"
    sd_server_exe: str = "sd-server"
    tts_server_exe: str = "tts-server"
    asr_server_exe: str = "parakeet-server"
    ttl: int = Field(default=600, ge=0)
    health_check_timeout: int = Field(default=300, ge=15)
    require_checksum: bool = False
    max_unpacked_gb: float = Field(default=32, gt=0)  # cap on what one install unpacks
    # llama.cpp: GiB kept free below the budget when choosing -c (SPEC §11.4); the default
    # covers the 0.1 GiB spread of the fixed overhead between the two measured model shapes
    vram_headroom_gb: float = Field(default=0.1, ge=0, le=1024)
    llama_swap: dict[str, Any] = Field(default_factory=dict)
    backends: list[BackendRow] = Field(default_factory=list)
    models: dict[str, ModelOverride] = Field(default_factory=dict)

    @field_validator("models", mode="before")
    @classmethod
    def _model_ids_are_safe(cls, value: Any) -> Any:
        """Checked before the overrides, so no error message quotes a raw hostile key."""
        if isinstance(value, dict):
            for key in value:
                problem = id_problem(str(key), "model id")
                if problem is not None:
                    raise ValueError(problem)
        return value

    @field_validator("models_dirs", mode="before")
    @classmethod
    def _one_dir_is_a_list(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    def override(self, model_id: str) -> ModelOverride:
        return self.models.get(model_id) or ModelOverride()

    def row(self, row_id: str) -> BackendRow | None:
        return next((r for r in self.backends if r.id == row_id), None)
