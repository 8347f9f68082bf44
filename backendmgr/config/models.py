"""Typed shape of the config file (SPEC §2): settings, registry rows, per-model overrides.

Records (:mod:`backendmgr.record`), frozen: the registry rules return new lists instead of
editing rows in place, and the store turns the result back into a minimal edit of the user's
YAML. Importing this module imports no pydantic: the YAML is validated by it, lazily.
"""

from __future__ import annotations

import re
import typing
from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import field
from typing import Annotated, Any

from ..discovery.chars import unsafe_char
from ..emit.expand import strip_comments
from ..emit.macros import MERGE_KEY, declared, env_names, macro_problem, value_problem
from ..emit.schema import string_field_problems
from ..errors import escaped
from ..immutable import frozen
from ..record import After, Before, Limit, Record, plain

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
_ENV_KEY = r"[A-Z_][A-Z0-9_]{0,127}"  # llama-swap's schema: ^[A-Z_][A-Z0-9_]*= (re's cache)


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
        if not eq or not re.fullmatch(_ENV_KEY, key):
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


def _checked(problem: Callable[[str], str | None]) -> Callable[[str | None], str | None]:
    """An :class:`After` check from a rule that says what is wrong, or None (pydantic hands an
    optional field's None to its checks too: it passes)."""

    def check(value: str | None) -> str | None:
        said = None if value is None else problem(value)
        if said is not None:
            raise ValueError(said)
        return value

    return check


def _path_not_blank(value: str) -> str | None:
    return "path must not be blank" if not value.strip() else None


def _any_row_id(value: str) -> str | None:
    return id_problem(value, "row id")


_RowId = Annotated[str, After(_checked(_any_row_id))]
_RowPath = Annotated[str, After(_checked(_path_not_blank))]


@frozen(kw_only=True, eq=True)
class BackendRow(Record):
    """One registry row: an executable that can serve the classes of its ``kind``."""

    id: _RowId
    kind: str = ""
    name: str = ""
    path: _RowPath
    default: bool = False
    managed: bool = False
    component: str = ""
    version: str = ""
    variant: str = ""
    build: bool = False

    def rule(self) -> str | None:
        """A hand-made row's id meets the ``backends add`` rule; installer rows are named by
        their component and release tag, which the installer checks."""
        if not self.managed and not self.build:
            return row_id_problem(self.id)
        return None

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


_DEVICE_SHAPE = 'device must be a GPU index or a list of them, e.g. "0,1"'


def _device_as_text(value: Any) -> Any:
    """A device as a person may write it (``1``, ``[0, 1]``, ``" 0, 1"``) as text."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise ValueError(_DEVICE_SHAPE)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, list) and all(
        isinstance(v, int) and not isinstance(v, bool) for v in value
    ):
        return ",".join(str(v) for v in value)
    if not isinstance(value, str):
        raise ValueError(_DEVICE_SHAPE)
    return value


def _device_is_indices(value: str | None) -> str | None:
    """Kept as ``"0,1"`` whichever way it was written."""
    if value is None:
        return None
    return ",".join(str(i) for i in device_indices(value))


def _env_as_words(value: Any) -> Any:
    """A string (``set MODEL env="A=1 B=2"``) splits like shell words; a YAML list is taken
    as it is."""
    if isinstance(value, str):
        import shlex

        bad = unsafe_char(value)
        if bad is not None:  # a newline is no word separator here: refused, not split
            raise ValueError(f"env holds control character {bad}; use printable characters")
        try:
            return shlex.split(value)
        except ValueError as exc:
            raise ValueError(f"{str(exc).lower()} in env; quote it as a shell would") from None
    if value is not None and (
        not isinstance(value, list) or not all(isinstance(w, str) for w in value)
    ):
        raise ValueError('env must be KEY=VALUE words, e.g. "GGML_CUDA_ENABLE_UNIFIED_MEMORY=1"')
    return value


def _env_is_pairs(value: list[str] | None) -> list[str] | None:
    """Each word checked, so no value can carry a newline; none at all is no env."""
    if value is None:
        return None
    return [f"{k}={v}" for k, v in env_pairs(value)] or None


def _extra_args_split(value: str | None) -> str | None:
    """Split like shell words now, so a bad quote is refused here, not later in ``cmd``."""
    if value is None:
        return None
    import shlex

    try:
        words = shlex.split(value)
    except ValueError as exc:
        raise ValueError(f"{str(exc).lower()} in {value!r}; quote it as a shell would") from None
    for word in words:  # a tab inside a word is fine; a line break is not
        bad = unsafe_char(word.replace("\t", " "))
        if bad is not None:
            raise ValueError(
                f"extra_args word {shown(word, 40)} holds control character {bad}; "
                "use printable characters"
            )
    return value


def _one_printable_word(value: str) -> str | None:
    """A word of the command line: no control character (a ``${`` is written as typed)."""
    bad = unsafe_char(value)
    if bad is not None:
        return f"{shown(value, 40)} holds control character {bad}; use printable characters"
    return None


def _passthrough_is_safe(value: dict[str, Any] | None) -> dict[str, Any] | None:
    """The passthrough's own rules (its ``env`` as ``env=``'s, no accidental macro); the
    global passthrough's macros are known only to :func:`override_problem`."""
    if value is None:
        return None
    problem = passthrough_problem(value, "llama_swap", None)
    if problem is not None:
        raise ValueError(problem)
    return value


_Word = Annotated[str | None, After(_checked(_one_printable_word))]
MAX_GB = 1 << 20  # the top of any size in GiB (a setting, BACKENDMGR_VRAM_GB): 1 PiB


@frozen(kw_only=True, eq=True)
class ModelOverride(Record):
    """Per-model settings for every backend kind; each emitter reads only its own fields."""

    backend: str | None = None
    # every number has a top: past what its reader takes, a model was dropped or a bad flag sent
    ctx: Annotated[int | None, Limit(gt=0, le=(1 << 31) - 1)] = None  # llama.cpp: int32
    vram_target_gb: Annotated[float | None, Limit(gt=0, le=MAX_GB)] = None
    vllm_gpu_util: Annotated[float | None, Limit(gt=0, le=1)] = None
    vllm_tensor_parallel: Annotated[int | None, Limit(ge=1, le=1024)] = None
    vllm_tokenizer: _Word = None
    vllm_tool_parser: _Word = None
    extra_args: Annotated[str | None, After(_extra_args_split)] = None
    unlisted: bool | None = None
    llama_swap: Annotated[dict[str, Any] | None, After(_passthrough_is_safe)] = None
    # "1", "0,1": the GPUs this model runs on (issue 24)
    device: Annotated[str | None, Before(_device_as_text), After(_device_is_indices)] = None
    # KEY=VALUE words set after the device's variables
    env: Annotated[list[str] | None, Before(_env_as_words), After(_env_is_pairs)] = None

    def to_yaml(self) -> dict[str, Any]:
        return typing.cast(dict[str, Any], plain(self, drop_none=True))

    def is_empty(self) -> bool:
        return not self.to_yaml()


def _model_ids_are_safe(value: Any) -> Any:
    """Checked before the overrides, so no error message quotes a raw hostile key."""
    if isinstance(value, dict):
        for key in value:
            problem = id_problem(str(key), "model id")
            if problem is not None:
                raise ValueError(problem)
    return value


def _one_dir_is_a_list(value: Any) -> Any:
    return [value] if isinstance(value, str) else value


@frozen(kw_only=True, eq=True)
class Settings(Record):
    """The whole config file. A missing file is ``Settings()``."""

    models_dirs: Annotated[list[str], Before(_one_dir_is_a_list)] = field(default_factory=list)
    output: str | None = None
    vram_budget_gb: Annotated[float | None, Limit(gt=0, le=MAX_GB)] = None
    server_exe: str = "llama-server"
    sd_server_exe: str = "sd-server"
    tts_server_exe: str = "tts-server"
    asr_server_exe: str = "parakeet-server"
    ttl: Annotated[int, Limit(ge=0, le=365 * 86400)] = 600  # s; 0: never unload
    health_check_timeout: Annotated[int, Limit(ge=15, le=86400)] = 300  # s
    require_checksum: bool = False
    max_unpacked_gb: Annotated[float, Limit(gt=0, le=MAX_GB)] = 32  # one install unpacks
    # vLLM's cpu/rocm variants: the user's mirror of the PyTorch index for that variant
    # (BACKENDMGR_TORCH_INDEX_URL wins); unset: uv's --torch-backend
    torch_index_url: Annotated[str | None, Limit(pattern=r"^https?://\S+$")] = None
    venv_smoke_timeout: Annotated[float, Limit(gt=0, le=3600)] = 300  # a venv's --version, s
    # llama.cpp: GiB kept free below the budget when choosing -c (SPEC §11.4); the default
    # covers the 0.1 GiB spread of the fixed overhead between the two measured model shapes
    vram_headroom_gb: Annotated[float, Limit(ge=0, le=1024)] = 0.1
    llama_swap: dict[str, Any] = field(default_factory=dict)
    backends: list[BackendRow] = field(default_factory=list)
    models: Annotated[
        dict[str, ModelOverride], Before(_model_ids_are_safe), After(_model_ids_are_safe)
    ] = field(default_factory=dict)

    def rule(self) -> str | None:
        """Every ``${`` in a user value names a macro llama-swap defines (issue 28): the
        global passthrough's strings, then each model's, with the global macro names."""
        problem = passthrough_problem(self.llama_swap, "llama_swap")
        if problem is not None:
            return problem
        names = macro_names(self.llama_swap)
        for model_id, ov in self.models.items():
            problem = override_problem(ov, names)
            if problem is not None:
                return f"models.{model_id}: {problem}"
        return alias_clash(self.models)

    def override(self, model_id: str) -> ModelOverride:
        return self.models.get(model_id) or ModelOverride()

    def row(self, row_id: str) -> BackendRow | None:
        return next((r for r in self.backends if r.id == row_id), None)
