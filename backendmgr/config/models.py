"""Typed shape of the config file (SPEC §2): settings, registry rows, per-model overrides.

Models are frozen: the registry rules return new lists instead of editing rows in place, and
the store turns the result back into a minimal edit of the user's YAML.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Iterator
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ..discovery.models import unsafe_char
from ..emit.expand import strip_comments
from ..emit.macros import MERGE_KEY, declared, env_names, macro_problem, value_problem
from ..emit.schema import string_field_problems
from ..errors import escaped

__all__ = [
    "MAX_DEVICES",
    "MAX_ENV_WORDS",
    "MAX_ID_CHARS",
    "MAX_ROW_ID_CHARS",
    "BackendRow",
    "ModelOverride",
    "Settings",
    "alias_clash",
    "device_indices",
    "env_pairs",
    "id_problem",
    "macro_names",
    "override_problem",
    "passthrough_problem",
    "row_id_problem",
    "shown",
    "unset_env",
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


MAX_DEVICES = 16
MAX_DEVICE_INDEX = 255
MAX_ENV_WORDS = 64
MAX_ENV_VALUE = 4096
_ENV_KEY = re.compile(r"[A-Z_][A-Z0-9_]{0,127}")  # llama-swap's schema: ^[A-Z_][A-Z0-9_]*=


def device_indices(value: str) -> tuple[int, ...]:
    """``"1"`` → (1,), ``"0,1"`` → (0, 1): GPU indices as the build's vendor counts them.
    Raises ValueError with a one-line reason for anything else."""
    if unsafe_char(value) is not None:
        raise ValueError(f'device {shown(value, 40)} holds a control character; use e.g. "0,1"')
    parts = [p.strip(" ") for p in value.split(",")]
    if len(parts) > MAX_DEVICES:
        raise ValueError(f"device names at most {MAX_DEVICES} GPUs")
    out: list[int] = []
    for part in parts:
        if not part.isascii() or not part.isdigit() or int(part) > MAX_DEVICE_INDEX:
            raise ValueError(
                f"device {shown(value, 40)} is not a GPU index or a list of them; "
                'use e.g. "1" or "0,1"'
            )
        if int(part) in out:
            raise ValueError(f"device {shown(value, 40)} names GPU {int(part)} twice")
        out.append(int(part))
    return tuple(out)


def env_pairs(words: list[str]) -> list[tuple[str, str]]:
    """``KEY=VALUE`` words as pairs; raises ValueError naming the first bad word. KEY is an
    upper-case variable name (llama-swap's schema), VALUE a single printable line."""
    if len(words) > MAX_ENV_WORDS:
        raise ValueError(f"env holds {len(words)} variables; the most is {MAX_ENV_WORDS}")
    pairs = []
    for word in words:
        key, eq, value = word.partition("=")
        if not eq or not _ENV_KEY.fullmatch(key):
            raise ValueError(
                f"env word {shown(word, 40)} is not KEY=VALUE with KEY in capitals, digits "
                'and "_" (e.g. GGML_CUDA_ENABLE_UNIFIED_MEMORY=1)'
            )
        if len(value) > MAX_ENV_VALUE:
            raise ValueError(
                f"env {key} is {len(value)} characters long; the most is {MAX_ENV_VALUE}"
            )
        bad = unsafe_char(value)
        if bad is not None:
            raise ValueError(f"env {key} holds control character {bad}; use printable characters")
        pairs.append((key, value))
    return pairs


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
    if "${" in value:  # it lands in metadata, where llama-swap has no escape for a macro
        return f'row id {shown(value)} may not contain "${{"; use letters, digits, "-", "_"'
    return None


def macro_names(block: Any) -> frozenset[str]:
    """The macro names a ``llama_swap`` passthrough's ``macros:`` defines."""
    macros = block.get("macros") if isinstance(block, dict) else None
    return frozenset(n for n, _ in declared(macros))


def _strings(value: Any, path: str, in_list: bool = False) -> Iterator[tuple[str, str, bool]]:
    """Every string value of a passthrough with its path and whether a list holds it
    (mapping keys are no macro target)."""
    if isinstance(value, str):
        yield path, value, in_list
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(item, f"{path}.{key}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _strings(item, f"{path}[{i}]", True)


def _merge_key(value: Any, path: str) -> str | None:
    """The path of the first mapping key ``<<`` in ``value``, or None."""
    if isinstance(value, dict):
        for key, item in value.items():
            if str(key) == MERGE_KEY:
                return f"{path}.{key}"
            if (found := _merge_key(item, f"{path}.{key}")) is not None:
                return found
    elif isinstance(value, list):
        for i, item in enumerate(value):
            if (found := _merge_key(item, f"{path}[{i}]")) is not None:
                return found
    return None


def passthrough_problem(block: Any, where: str, defined: Collection[str] | None = ()) -> str | None:
    """Why a ``llama_swap`` passthrough cannot be written for llama-swap, or None: its ``env``
    breaks the rules ``env=`` has, or a string holds a ``${`` that is no explicit macro
    (``defined``: macro names defined elsewhere, e.g. the global passthrough's; None: any
    ``${name}`` passes, for the check that cannot see the global passthrough)."""
    if not isinstance(block, dict):
        return f"{where} must be a YAML mapping"
    merge = _merge_key(block, where)
    if merge is not None:
        return f'{merge}: llama-swap reads a "<<" key as a YAML merge, not as a key'
    names = None if defined is None else set(defined) | macro_names(block)
    shape = string_field_problems(block, where)
    if shape:
        return shape[0]
    if "macros" in block:
        if not isinstance(block["macros"], dict):
            return f"{where}.macros must be a mapping of names to values"
        bad = next((p for n, v in declared(block["macros"]) if (p := macro_problem(n, v))), None)
        if bad is not None:
            return f"{where}.macros: {bad}"
    if "env" in block:
        env = block["env"]
        if not isinstance(env, list) or not all(isinstance(w, str) for w in env):
            return f"{where}.env must be a list of KEY=VALUE strings"
        try:
            env_pairs(env)
        except ValueError as exc:
            return f"{where}.{exc}"
    for path, text, in_list in _strings(block, where):
        # llama-swap re-marshals its config with yaml.v3, whose emitter writes a list item
        # that starts with a line break, or a line break after a tab, as YAML it cannot read
        # back: a passthrough string is printable lines, and a list item one line
        bad = unsafe_char(text if in_list else text.replace("\n", " "))
        if bad is not None:
            return f"{path} holds control character {bad}; use printable characters"
        allowed = names | {"PID"} if names is not None and path == f"{where}.cmdStop" else names
        if path in (f"{where}.cmd", f"{where}.cmdStop"):  # llama-swap drops comment lines first
            text = strip_comments(text)
        problem = value_problem(text, path, allowed)
        if problem is not None:
            return problem
    return None


def override_problem(ov: ModelOverride, defined: Collection[str] = ()) -> str | None:
    """The macro rule for one model's values, given the global passthrough's macro names:
    ``env`` values and passthrough strings may hold only explicit macros (``extra_args`` needs
    no check: a ``${`` there that is none is written as a literal)."""
    names = set(defined) | macro_names(ov.llama_swap)
    for word in ov.env or ():
        key, _, value = word.partition("=")
        problem = value_problem(value, f"env {key}", names)
        if problem is not None:
            return problem
    if ov.llama_swap is not None:
        return passthrough_problem(ov.llama_swap, "llama_swap", names)
    return None


def alias_clash(models: dict[str, ModelOverride]) -> str | None:
    """llama-swap refuses a config where two models share an alias: the first such alias."""
    owner: dict[str, str] = {}
    for model_id, ov in models.items():
        aliases = (ov.llama_swap or {}).get("aliases")
        for alias in aliases if isinstance(aliases, list) else []:
            if isinstance(alias, str) and owner.setdefault(alias, model_id) != model_id:
                return f'alias {shown(alias)} is given to both "{owner[alias]}" and "{model_id}"'
    return None


def unset_env(texts: Iterable[str], environ: Collection[str]) -> list[str]:
    """The ``${env.NAME}`` names in ``texts`` that ``environ`` lacks, in order, once each."""
    out: list[str] = []
    for text in texts:
        out += [n for n in env_names(text) if n not in environ and n not in out]
    return out


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
    device: str | None = None  # "1", "0,1": the GPUs this model runs on (issue 24)
    env: list[str] | None = None  # KEY=VALUE words set after the device's variables

    @field_validator("device", mode="before")
    @classmethod
    def _device_is_indices(cls, value: Any) -> Any:
        """Kept as ``"0,1"`` whichever way it was written (``1``, ``[0, 1]``, ``" 0, 1"``)."""
        if value is None:
            return None
        if isinstance(value, bool):
            raise ValueError('device must be a GPU index or a list of them, e.g. "0,1"')
        if isinstance(value, int):
            value = str(value)
        elif isinstance(value, list) and all(
            isinstance(v, int) and not isinstance(v, bool) for v in value
        ):
            value = ",".join(str(v) for v in value)
        if not isinstance(value, str):
            raise ValueError('device must be a GPU index or a list of them, e.g. "0,1"')
        return ",".join(str(i) for i in device_indices(value))

    @field_validator("env", mode="before")
    @classmethod
    def _env_is_words(cls, value: Any) -> Any:
        """A string (``set MODEL env="A=1 B=2"``) splits like shell words; a YAML list is
        taken as it is. Either way each word is checked, so no value can carry a newline."""
        if value is None:
            return None
        if isinstance(value, str):
            import shlex

            bad = unsafe_char(value)
            if bad is not None:  # a newline is no word separator here: refused, not split
                raise ValueError(f"env holds control character {bad}; use printable characters")
            try:
                value = shlex.split(value)
            except ValueError as exc:
                raise ValueError(f"{str(exc).lower()} in env; quote it as a shell would") from None
        if not isinstance(value, list) or not all(isinstance(w, str) for w in value):
            raise ValueError(
                'env must be KEY=VALUE words, e.g. "GGML_CUDA_ENABLE_UNIFIED_MEMORY=1"'
            )
        return [f"{k}={v}" for k, v in env_pairs(value)] or None

    @field_validator("extra_args")
    @classmethod
    def _extra_args_split(cls, value: str | None) -> str | None:
        """Split like shell words now, so a bad quote is refused here, not later in ``cmd``."""
        if value is not None:
            import shlex

            try:
                words = shlex.split(value)
            except ValueError as exc:
                raise ValueError(
                    f"{str(exc).lower()} in {value!r}; quote it as a shell would"
                ) from None
            for word in words:  # a tab inside a word is fine; a line break is not
                bad = unsafe_char(word.replace("\t", " "))
                if bad is not None:
                    raise ValueError(
                        f"extra_args word {shown(word, 40)} holds control character {bad}; "
                        "use printable characters"
                    )
        return value

    @field_validator("vllm_tokenizer", "vllm_tool_parser")
    @classmethod
    def _one_printable_word(cls, value: str | None) -> str | None:
        """A word of the command line: no control character (a ``${`` is written as typed)."""
        if value is not None:
            bad = unsafe_char(value)
            if bad is not None:
                raise ValueError(
                    f"{shown(value, 40)} holds control character {bad}; use printable characters"
                )
        return value

    @field_validator("llama_swap")
    @classmethod
    def _passthrough_is_safe(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        """The passthrough's own rules (its ``env`` as ``env=``'s, no accidental macro); the
        global passthrough's macros are known only to :func:`override_problem`."""
        if value is not None:
            problem = passthrough_problem(value, "llama_swap", None)
            if problem is not None:
                raise ValueError(problem)
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
    # vLLM's cpu/rocm variants: the user's mirror of the PyTorch index for that variant
    # (BACKENDMGR_TORCH_INDEX_URL wins); unset: uv's --torch-backend
    torch_index_url: str | None = Field(default=None, pattern=r"^https?://\S+$")
    venv_smoke_timeout: float = Field(default=300, gt=0, le=3600)  # a venv's --version, s
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

    @model_validator(mode="after")
    def _macros_are_explicit(self) -> Settings:
        """Every ``${`` in a user value names a macro llama-swap defines (issue 28): the
        global passthrough's strings, then each model's, with the global macro names."""
        problem = passthrough_problem(self.llama_swap, "llama_swap")
        if problem is not None:
            raise ValueError(problem)
        names = macro_names(self.llama_swap)
        for model_id, ov in self.models.items():
            problem = override_problem(ov, names)
            if problem is not None:
                raise ValueError(f"models.{model_id}: {problem}")
        clash = alias_clash(self.models)
        if clash is not None:
            raise ValueError(clash)
        return self

    def override(self, model_id: str) -> ModelOverride:
        return self.models.get(model_id) or ModelOverride()

    def row(self, row_id: str) -> BackendRow | None:
        return next((r for r in self.backends if r.id == row_id), None)
