"""Registry and per-model overrides: ``backends add/remove``, ``default``, ``pin``, ``set``."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from .._inline import in_thread
from ..config.models import (
    MAX_ID_CHARS,
    BackendRow,
    ModelOverride,
    Settings,
    id_problem,
    macro_names,
    override_problem,
    row_id_problem,
    unset_env,
)
from ..config.paths import as_config_means
from ..errors import InvalidInput, MalformedId, Refused, UsageError, did_you_mean, escaped, unknown
from ..registry import rows as registry
from ..registry.kinds import classes_of
from .facts import discover, pinned_by
from .values import SETTABLE_KEYS, check_key, first_error, override_of, parse_value

if TYPE_CHECKING:  # an edit loads only its own request's and result's modules
    from ..api_models.folders import ModelsDirResult
    from ..api_models.overrides import ModelSettingsResult
    from ..api_models.pins import PinResult
    from ..api_models.registry import BackendRowResult, RemovedRow
    from ..requests import (
        AddBackendRequest,
        DefaultRequest,
        ModelsDirRequest,
        PinRequest,
        RemoveBackendRequest,
        SetRequest,
        UnpinRequest,
        UnsetRequest,
    )
    from .context import Context
    from .generate import Generator
    from .models import Models, Plan

    _Change = ModelsDirRequest | PinRequest | UnpinRequest | SetRequest | UnsetRequest  # dry runs

__all__ = ["SETTABLE_KEYS", "Registry"]

T = TypeVar("T")


class Registry:
    """The rows of the registry and the per-model overrides; every change regenerates."""

    __slots__ = ("ctx", "generator", "models")

    def __init__(self, ctx: Context, models: Models, generator: Generator) -> None:
        self.ctx = ctx
        self.models = models
        self.generator = generator

    async def _mutate(
        self, change: Callable[[Settings], tuple[Settings, T]], *, generate: bool
    ) -> tuple[T, list[str]]:
        """Apply ``change`` under the config lock with its regeneration, checked before the
        config is written (:meth:`.Generator.change`): what ``change`` returned, and the
        regeneration's warnings (a hand-edited config kept as .bak) for the result."""
        result, regen, _ = await self.generator.change(change, generate=generate)
        return result, regen

    async def _change(
        self, change: Callable[[Settings], tuple[Settings, T]], req: _Change
    ) -> tuple[T, list[str], dict[str, Any]]:
        """``_mutate``, or for a dry run the same ``change`` stopped before the write: its
        result, the regeneration's warnings, and the dry run's fields for the result."""
        result, regen, dry, _ = await self._edit(change, req)
        return result, regen, dry

    async def _edit(
        self, change: Callable[[Settings], tuple[Settings, T]], req: _Change
    ) -> tuple[T, list[str], dict[str, Any], Plan | None]:
        """``_change``, and the plan the regeneration wrote the file from (None: a dry run or
        ``--no-generate``), for the notes on the model changed: one discovery per change."""
        if req.dry_run:
            result, diff = await self.ctx.preview(change)
            return result, [], {"dry_run": True, "diff": diff}, None
        result, regen, plan = await self.generator.change(change, generate=req.generate)
        return result, regen, {}, plan

    # --- registry ---------------------------------------------------------------------------

    async def add_backend(self, req: AddBackendRequest) -> BackendRowResult:
        """Append a manual row; a path that is missing or not executable needs ``force``."""
        from ..api_models.registry import BackendRowResult

        row_id, default, path = req.id, req.default, req.path
        _refuse(row_id_problem(row_id))
        try:
            new_row = BackendRow(id=row_id, kind=req.kind, name=req.name, path=path)
        except ValueError as exc:
            raise InvalidInput(first_error(exc)) from exc
        catalog_ids = self.ctx.catalog.ids()
        problem = await in_thread(_exe_problem, path)

        def change(s: Settings) -> tuple[Settings, BackendRow]:
            rows = registry.add_manual(
                s.backends, new_row, catalog_ids=catalog_ids, make_default=default
            )
            if problem and not req.force:
                raise Refused(f"{problem}; give the executable, or add --force to keep it anyway")
            added = next(r for r in rows if r.id == row_id)
            return replace(s, backends=rows), added

        added, regen = await self._mutate(change, generate=req.generate)
        star = " (★)" if added.default else ""
        return BackendRowResult.of(
            added,
            message=f'added backend row "{row_id}"{star}',
            warnings=[problem, *regen] if problem else regen,
        )

    async def remove_backend(self, req: RemoveBackendRequest) -> RemovedRow:
        from ..api_models.registry import RemovedRow

        row_id = req.id
        _refuse(row_id_problem(row_id))  # only manual rows can be removed

        def change(s: Settings) -> tuple[Settings, list[str]]:
            rows = registry.remove_manual(s.backends, row_id)
            return replace(s, backends=rows), pinned_by(s, row_id)

        pinned, regen = await self._mutate(change, generate=req.generate)
        stale = f'pins to "{row_id}" are now stale and fall back: {", ".join(pinned)}'
        return RemovedRow(
            message=f'removed backend row "{row_id}"',
            warnings=[stale, *regen] if pinned else regen,
            id=row_id,
            removed=True,
        )

    async def set_default(self, req: DefaultRequest) -> BackendRowResult:
        from ..api_models.registry import BackendRowResult

        row_id = req.row
        # a manual or managed row (component ids can be long); build rows are never ★
        _refuse(row_id_problem(row_id, MAX_ID_CHARS))

        def change(s: Settings) -> tuple[Settings, tuple[BackendRow, bool]]:
            rows = registry.set_default(s.backends, row_id)
            row = next(r for r in rows if r.id == row_id)
            return replace(s, backends=rows), (row, rows != s.backends)

        (row, changed), regen = await self._mutate(change, generate=req.generate)
        classes = ", ".join(sorted(classes_of(row.kind)))
        when = "now" if changed else "already"
        return BackendRowResult.of(
            row,
            message=f'"{row_id}" is {when} the default (★) for {classes}',
            changed=changed,
            warnings=regen,
        )

    # --- models folders ---------------------------------------------------------------------

    async def models_dir(self, req: ModelsDirRequest) -> ModelsDirResult:
        """``models add-dir`` / ``remove-dir``: the one documented way to edit ``models_dirs``
        (a locked, atomic config edit). A folder to add must exist and be readable; it is
        stored absolute, so the config means the same from any working directory."""
        from ..api_models.folders import ModelsDirResult

        config = str(self.ctx.store.path)
        path, add, store = req.path, req.add, self.ctx.store.path
        if add:
            folder = await in_thread(_readable_folder, path)
        else:
            folder = path

        def change(s: Settings) -> tuple[Settings, tuple[bool, list[str]]]:
            dirs = list(s.models_dirs)
            same = [d for d in dirs if _same_folder(d, folder, store)]
            if add:
                if same:
                    return s, (False, dirs)
                dirs.append(folder)
            else:
                if not same:
                    raise unknown(
                        f'"{path}" is not in models_dirs of {config}',
                        path,
                        dirs,
                        hint=f"models_dirs: {', '.join(dirs)}" if dirs else "models_dirs is empty",
                        error=UsageError,
                    )
                dirs = [d for d in dirs if d not in same]
            return replace(s, models_dirs=dirs), (True, dirs)

        (changed, dirs), regen, dry = await self._change(change, req)
        if changed:
            verb = _would(dry, "added", "add") if add else _would(dry, "removed", "remove")
            where = "to" if add else "from"
            message = f"{verb} {folder} {where} models_dirs in {config}"
        else:
            message = f"{folder} is already in models_dirs of {config}"
        return ModelsDirResult(
            message=message,
            changed=changed,
            warnings=regen,
            path=folder,
            config=config,
            models_dirs=dirs,
            **dry,
        )

    # --- per-model overrides --------------------------------------------------------------

    async def pin(self, req: PinRequest) -> PinResult:
        from ..api_models.pins import PinResult

        model, row_id = _check_model_id(req.model), req.row
        _refuse(id_problem(row_id, "row id"))  # a build row's tag may hold "/"
        settings = await self.ctx.settings()
        registry.pin_target(settings.backends, row_id)

        def change(s: Settings) -> tuple[Settings, bool]:
            registry.pin_target(s.backends, row_id)
            current = s.override(model)
            updated = replace(current, backend=row_id)
            return _with_override(s, model, updated), current.backend != row_id

        changed, regen, dry, plan = await self._edit(change, req)
        warnings = await self._model_warnings(settings, model, None, plan)
        return PinResult(
            message=f'{_would(dry, "pinned", "pin")} "{model}" to "{row_id}"'
            if changed
            else f'"{model}" was already pinned to "{row_id}"',
            changed=changed,
            warnings=[*warnings, *regen],
            model=model,
            backend=row_id,
            **dry,
        )

    async def unpin(self, req: UnpinRequest) -> PinResult:
        from ..api_models.pins import PinResult

        model = _check_model_id(req.model)

        def change(s: Settings) -> tuple[Settings, str | None]:
            current = s.override(model)
            updated = replace(current, backend=None)
            return _with_override(s, model, updated), current.backend

        previous, regen, dry = await self._change(change, req)
        return PinResult(
            warnings=regen,
            message=f'{_would(dry, "unpinned", "unpin")} "{model}" (was "{previous}")'
            if previous
            else f'"{model}" has no pin',
            changed=previous is not None,
            model=model,
            backend=None,
            **dry,
        )

    async def set_overrides(self, req: SetRequest) -> ModelSettingsResult:
        """Validate ``KEY=VALUE`` strings against the override model, then store them."""
        from ..api_models.overrides import ModelSettingsResult

        model, values = _check_model_id(req.model), req.values
        parsed = {key: parse_value(key, text) for key, text in values.items()}
        try:  # refuse a bad value before any discovery
            override = override_of(parsed)
        except ValueError as exc:  # a value its key cannot take: a usage error (issue 20)
            raise UsageError(first_error(exc)) from exc
        settings = await self.ctx.settings()
        # before discovery; the model's stored passthrough may define the macros named
        _refuse_macros(override, settings, macro_names(settings.override(model).llama_swap))
        unset = _unset_env(values.values())
        devices: tuple[str, ...] = ()
        if override.device:  # issue 24: a device the host lacks (only then is the host probed)
            from ..emit.devices import device_warning

            devices = device_warning(override.device, self.models.adapters())

        def change(s: Settings) -> tuple[Settings, tuple[ModelOverride, bool]]:
            current = s.override(model)
            merged = {**current.to_yaml(), **parsed}
            try:
                updated = override_of(merged)
            except ValueError as exc:
                raise InvalidInput(first_error(exc)) from exc
            _refuse_macros(updated, s)
            return _with_override(s, model, updated), (updated, updated != current)

        (updated, changed), regen, dry, plan = await self._edit(change, req)
        warnings = await self._model_warnings(settings, model, override.ctx, plan)
        warnings += unset + devices
        if parsed.keys() & {"vllm_tool_parser", "ctx", "vram_target_gb"}:
            # the plan's own notes: a parser the build lacks, a ctx that cannot fit
            warnings += await self._plan_warnings(model, plan)
        if "extra_args" in parsed:  # issue 32: a flag the build it runs on does not list
            warnings += await self._flag_warnings(model, updated.extra_args, plan)
        # as typed, but a newline or an escape sequence in a value is shown, not obeyed
        shown = ", ".join(f"{k}={escaped(text)}" for k, text in values.items())
        return ModelSettingsResult(
            message=f'{_would(dry, "set", "set")} {shown} for "{model}"'
            if changed
            else f'"{model}" already has {shown}',
            changed=changed,
            warnings=[*warnings, *regen],
            model=model,
            **updated.to_yaml(),
            **dry,
        )

    async def _model_warnings(
        self, settings: Settings, model: str, ctx: int | None, plan: Plan | None
    ) -> tuple[str, ...]:
        """SPEC §13 keeps a pin or setting for a model not found (yet), but says so; a ``ctx``
        above what the model was trained for is kept too, with the trained value named. The
        models are the regeneration's (``plan``), else discovered here."""
        if plan is not None:
            found = plan.found
        else:
            _, found = await in_thread(
                discover, settings, self.ctx.store.path, self.ctx.paths.cache
            )
        ids = [m.id for m in found.models] + [s.id for s in found.skipped]
        if model not in ids:
            close = did_you_mean(model, ids) or "; it is kept for when the model appears"
            return (f'no discovered model "{model}"{close}',)
        if ctx is None:
            return ()
        meta = next((m.meta for m in found.models if m.id == model), None)
        trained = meta.context_length if meta is not None else None
        if trained and ctx > trained:
            return (
                f"ctx {ctx} is above the {trained} tokens {model} was trained with; "
                "kept as set (quality may drop past the trained context)",
            )
        return ()

    async def _plan(self, model: str, plan: Plan | None) -> Plan:
        """The plan ``model``'s notes come from: the regeneration's, else that model planned
        alone (the plan the whole run gives it)."""
        return plan if plan is not None else await self.models.plan(model)

    async def _plan_warnings(self, model: str, plan: Plan | None) -> tuple[str, ...]:
        """A ``vllm_tool_parser`` the model's resolved vLLM build does not register (§12.4), a
        pinned ``ctx`` whose estimate exceeds the budget: the same notes ``generate`` writes,
        so the two never disagree."""
        from ..emit.sizing import is_over_budget
        from ..emit.tools import is_override_warning

        planned = (await self._plan(model, plan)).planned(model)
        if planned is None:
            return ()
        return tuple(n for n in planned.notes if is_override_warning(n) or is_over_budget(n))

    async def _flag_warnings(
        self, model: str, extra_args: str | None, plan: Plan | None
    ) -> tuple[str, ...]:
        from ..catalog.capabilities import unlisted_flags
        from ..emit.plan import Entry
        from ..registry.rows import build_id_of

        planned = (await self._plan(model, plan)).planned(model)
        if not isinstance(planned, Entry) or planned.resolution.row is None:
            return ()
        build = build_id_of(planned.resolution.row)
        entry = next((e for e in self.ctx.builds.installed() if e.id == build), None)
        caps = entry.receipt.capabilities if entry is not None else None
        known = (caps.options or []) if caps is not None else []
        return tuple(
            f"{flag} is not an option of {build}, which {model} runs on{did_you_mean(flag, known)}"
            for flag in unlisted_flags(extra_args, caps)
        )

    async def unset_overrides(self, req: UnsetRequest) -> ModelSettingsResult:
        from ..api_models.overrides import ModelSettingsResult

        model, keys = _check_model_id(req.model), req.keys
        for key in keys:
            check_key(key)

        def change(s: Settings) -> tuple[Settings, tuple[ModelOverride, bool]]:
            current = s.override(model)
            updated = replace(current, **dict.fromkeys(keys))
            _refuse_macros(updated, s)  # unset llama_swap while env names its macros: refused
            return _with_override(s, model, updated), (updated, updated != current)

        (updated, changed), regen, dry = await self._change(change, req)
        named = ", ".join(keys)
        return ModelSettingsResult(
            message=f'{_would(dry, "unset", "unset")} {named} for "{model}"'
            if changed
            else f'"{model}" has no {named} set',
            changed=changed,
            warnings=regen,
            model=model,
            **updated.to_yaml(),
            **dry,
        )


def _would(dry: Mapping[str, Any], done: str, verb: str) -> str:
    """The message's verb: what was done, or in a dry run what would be."""
    return f"would {verb}" if dry else done


def _readable_folder(path: str) -> str:
    """``path`` as ``models_dirs`` stores it (absolute, ``~`` expanded), or why it cannot be
    scanned: a typo in the folder is refused before the config changes."""
    if not path.strip() or "\n" in path or "\x00" in path:
        raise UsageError(f"{path!r} is not a folder path")
    folder = os.path.abspath(os.path.expanduser(path))
    if not os.path.exists(folder):
        raise UsageError(f"{folder} does not exist; give the folder that holds your models")
    if not os.path.isdir(folder):
        raise UsageError(f"{folder} is not a folder; give the folder that holds the file")
    if not os.access(folder, os.R_OK | os.X_OK):
        raise Refused(f"{folder} cannot be read by this user")
    return folder


def _same_folder(stored: str, given: str, config: Path) -> bool:
    """Whether a ``models_dirs`` entry of ``config`` names ``given`` (as typed, from the
    working folder): the same text, or the folder the config means, absolute or resolved."""
    if stored == given:
        return True
    a = as_config_means(config, stored)
    b = os.path.abspath(os.path.expanduser(given))
    return a == b or os.path.realpath(a) == os.path.realpath(b)


def _with_override(s: Settings, model: str, override: ModelOverride) -> Settings:
    models = dict(s.models)
    if override.is_empty():
        models.pop(model, None)
    else:
        models[model] = override
    try:  # the whole config's rules: an alias another model has is refused here
        return replace(s, models=models)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def _refuse_macros(
    override: ModelOverride, settings: Settings, more: frozenset[str] = frozenset()
) -> None:
    """Issue 28: the macro rule (the one check a hand-edited config meets when it is read),
    with the macro names of the global passthrough (and ``more``)."""
    problem = override_problem(override, macro_names(settings.llama_swap) | more)
    if problem is not None:
        raise UsageError(problem)


def _unset_env(texts: Iterable[str]) -> tuple[str, ...]:
    """A ``${env.NAME}`` whose NAME this environment lacks is kept: llama-swap reads its own
    environment when it loads the file, but refuses to load where NAME is unset."""
    return tuple(
        f"${{env.{name}}}: {name} is not set here; llama-swap refuses to load the config "
        f"unless {name} is set where it runs"
        for name in unset_env(texts, os.environ)
    )


def _refuse(problem: str | None) -> None:
    if problem is not None:
        raise MalformedId(problem)


def _check_model_id(model: str) -> str:
    """The model id as stored. Checked before stripping, so "x\\n" is refused, not cut to "x"."""
    _refuse(id_problem(model, "model id"))
    return model.strip()


def _exe_problem(path: str) -> str | None:
    """Why ``path`` cannot be run as given, or None (a bare name is looked up on PATH)."""
    if os.sep not in path and "/" not in path and not path.startswith("~"):
        import shutil  # only here: its archive modules cost every edit

        return None if shutil.which(path) else f'"{path}" is not on PATH'
    target = Path(path).expanduser()
    if not target.exists():
        return f"{path} does not exist"
    if not target.is_file():
        return f"{path} is not a file"
    if os.name != "nt" and not os.access(target, os.X_OK):
        return f"{path} is not executable"
    return None
