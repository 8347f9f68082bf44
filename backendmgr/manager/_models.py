"""Models and the generated config: discovery, planning, ``models``, ``cmd``, ``generate``."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from .._locks import hold
from ..api_models import CmdResult, GeneratedText, GenerateResult, ModelInfo, SkippedModel
from ..config.models import Settings
from ..errors import Refused, VerificationError, unknown

if TYPE_CHECKING:
    pass

from ._base import ManagerBase

__all__ = ["ModelsMixin"]

MAX_SHOWN = 4 << 20  # bytes of the generated config that ``generated`` returns


def _written_problems(target: Path, entries: list[Any]) -> list[str]:
    """What is wrong with the config at ``target`` against the plan (unreadable counts)."""
    from ..emit.verify import check_config

    try:
        text = target.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return [f"it cannot be read ({exc})"]
    return check_config(text, entries)


def _plan_one(
    plan_model: Any,
    settings: Settings,
    model: Any,
    card_gb: float | None,
    parsers: Any = None,
    caps: Any = None,
    gpus: Any = (),
) -> Any:
    """One model's plan; arithmetic on a header's numbers that still fails skips that model
    with the reason rather than failing every other one (discovery already bounds them)."""
    from ..emit.plan import Skip

    try:
        return plan_model(settings, model, card_gb, parsers, caps, gpus)
    except (ArithmeticError, ValueError) as exc:
        return Skip(model.id, model.path, f"cannot size this model ({type(exc).__name__}: {exc})")


class ModelsMixin(ManagerBase):
    def _pipeline(self, settings: Settings) -> tuple[Any, Any, str]:
        """Discover, plan every model and hash the inputs (runs in a worker thread)."""
        from ..discovery.walk import discover, scan_folders
        from ..emit.devices import uses_devices
        from ..emit.plan import plan_model
        from ..emit.regen import inputs_hash
        from ..measure.tuned import TunedStore, apply_tuned
        from ._capabilities import capability_index

        scan = scan_folders(settings.models_dirs)
        installed = self.builds.installed()
        receipts = [e.receipt.model_dump_json() for e in installed if e.receipt.kind]
        parsers = {e.id: e.receipt.tool_parsers for e in installed}  # what each vLLM registers
        caps = capability_index(settings, self.builds, self.paths.cache)
        receipts += [f"probed {p} {c.model_dump_json()}" for p, c in sorted(caps.by_path.items())]
        gpus = self.host.adapters if uses_devices(settings) else ()  # issue 24: device pins
        receipts += [f"gpu {g!r}" for g in gpus]
        receipts.append(TunedStore(self.paths).inputs_text())  # issue 22: measured contexts
        digest = inputs_hash(settings, receipts, scan.inputs, self.card_gb)
        found = discover(scan, self.paths.cache / "gguf-meta.json")
        plans = [
            _plan_one(plan_model, settings, m, self.card_gb, parsers, caps, gpus)
            for m in found.models
        ]
        plans = apply_tuned(  # issue 22: a tuned context in place of the estimate
            self,
            settings,
            found.models,
            plans,
            lambda s, m: _plan_one(plan_model, s, m, self.card_gb, parsers, caps, gpus),
        )
        return found, plans, digest

    async def plan(self) -> tuple[Settings, Any, list[Any], str]:
        settings = await self.settings()
        found, plans, digest = await anyio.to_thread.run_sync(self._pipeline, settings)
        return settings, found, plans, digest

    async def models_info(self) -> list[ModelInfo]:
        from ..emit.plan import Entry
        from ..measure.tuned import tuning_text
        from ._verify import cached_result, read_results, verified_text

        settings, found, plans, _ = await self.plan()
        cache = await anyio.to_thread.run_sync(read_results, self)
        out = []
        for model, planned in zip(found.models, plans, strict=True):
            res = planned.resolution
            checked = cached_result(self, planned, cache) if isinstance(planned, Entry) else None
            backend = None
            if res is not None:
                backend = {
                    "id": res.row.id if res.row else None,
                    "kind": res.kind or "llama",
                    "path": res.exe,
                    "reason": res.reason,
                }
            out.append(
                {
                    "id": model.id,
                    "path": model.path,
                    "format": model.format,
                    "class": model.cls,
                    "role": model.role,
                    "size_gb": round(model.size_gb, 2),
                    "backend": backend,
                    "skipped": None if isinstance(planned, Entry) else planned.reason,
                    "notes": list(planned.notes),
                    "est_vram_gb": (
                        planned.metadata.get("est_vram_gb") if isinstance(planned, Entry) else None
                    ),
                    "verified": checked,
                    "verification": verified_text(checked) if isinstance(planned, Entry) else None,
                    "tuning": tuning_text(settings, planned)
                    if isinstance(planned, Entry)
                    else None,
                }
            )
        for skip in found.skipped:
            out.append(
                {
                    "id": skip.id,
                    "path": skip.path,
                    "format": "gguf" if skip.path.lower().endswith(".gguf") else "hf",
                    "class": None,
                    "role": None,
                    "size_gb": None,
                    "backend": None,
                    "skipped": skip.reason,
                    "notes": [],
                    "est_vram_gb": None,
                    "verified": None,
                    "verification": None,
                }
            )
        return sorted((ModelInfo.model_validate(m) for m in out), key=lambda m: m.id)

    async def folder_problems(self) -> list[str]:
        """Which ``models_dirs`` entries cannot be scanned, and why (discovery skips them)."""
        settings = await self.settings()
        return await anyio.to_thread.run_sync(_folder_problems, settings.models_dirs)

    async def cmd(self, model_id: str) -> CmdResult:
        from ..emit.plan import Entry

        _, found, plans, _ = await self.plan()
        for model, planned in zip(found.models, plans, strict=True):
            if model.id == model_id:
                if not isinstance(planned, Entry):
                    raise Refused(f"{model_id}: {planned.reason}")
                return CmdResult(id=model_id, argv=planned.argv)
        skipped = next((s for s in found.skipped if s.id == model_id), None)
        if skipped is not None:
            raise Refused(f"{model_id} is skipped: {skipped.reason}")
        raise unknown(
            f'no model "{model_id}" was discovered',
            model_id,
            [m.id for m in found.models] + [s.id for s in found.skipped],
            hint='see "backendmgr models"',
        )

    async def generate(
        self, *, output: str | None = None, force: bool = False, check: bool = False
    ) -> GenerateResult:
        """Rewrite the llama-swap config when its inputs changed (``force``: always)."""
        from filelock import FileLock

        from .._fs import atomic_write_bytes
        from .._version import __version__
        from ..emit.document import build_document, dump
        from ..emit.plan import Entry, Skip
        from ..emit.regen import (
            edited_by_hand,
            keep_copy,
            output_hash,
            record_written,
            written_record,
        )
        from ..emit.verify import check_shape

        settings = await self.settings()
        target = self.output_path(settings, output)
        target.parent.mkdir(parents=True, exist_ok=True)
        async with hold(FileLock(self._output_lock(target))):
            settings = await self.settings()  # re-read under the lock: the newest wins
            found, plans, digest = await anyio.to_thread.run_sync(self._pipeline, settings)
            entries = [p for p in plans if isinstance(p, Entry)]
            skipped = [p for p in plans if isinstance(p, Skip)]
            skipped += [Skip(s.id, s.path, s.reason) for s in found.skipped]
            current = output_hash(target) if target.exists() else None
            record = written_record(self.paths.home, target)
            edited = await anyio.to_thread.run_sync(edited_by_hand, record, target)
            result = GenerateResult(
                message=f"{target} is up to date",
                changed=False,
                output=str(target),
                written=False,
                models=len(entries),
                skipped=[
                    SkippedModel(id=s.id, reason=s.reason)
                    for s in sorted(skipped, key=lambda s: s.id)
                ],
            )
            if check:
                if edited:
                    raise Refused(
                        f"{target} was modified since backendmgr wrote it; "
                        '"backendmgr generate" rewrites it and keeps your copy as .bak'
                    )
                if current != digest:
                    state = "missing" if current is None and not target.exists() else "stale"
                    raise Refused(f'{target} is {state}; run "backendmgr generate"')
                # A file whose header claims these inputs must also say what the plan says.
                drift = await anyio.to_thread.run_sync(_written_problems, target, entries)
                if drift:
                    raise VerificationError(
                        f"{target} does not match its plan: {drift[0]}; "
                        'run "backendmgr generate --force"'
                    )
                return result
            if current == digest and not force and not edited:
                return result
            document = build_document(
                version=__version__,
                inputs_hash=digest,
                health_check_timeout=settings.health_check_timeout,
                passthrough=settings.llama_swap,
                entries=entries,
                skipped=skipped,
            )
            wrong = check_shape(document)  # e.g. a passthrough value of the wrong type
            if wrong:
                raise VerificationError(f"the llama-swap config would be invalid: {wrong[0]}")
            if edited and target.is_file():
                backup = await anyio.to_thread.run_sync(keep_copy, target)
                result.backup = str(backup)
                result.warn(f"{target} was modified by hand; kept that copy as {backup}")
            body = dump(document).encode()
            await anyio.to_thread.run_sync(atomic_write_bytes, target, body)
            await anyio.to_thread.run_sync(record_written, record, body)
            result.written = True
            result.changed = True
            result.message = f"wrote {target}: {len(entries)} models, {len(skipped)} skipped"
            return result

    def _output_lock(self, target: Path) -> Path:
        """One lock per output file, kept under the data home: the folder that holds the
        llama-swap config is the user's, and gets nothing but the file (and a .bak)."""
        import hashlib

        self.paths.locks.mkdir(parents=True, exist_ok=True)
        key = hashlib.sha256(str(target).encode()).hexdigest()[:16]
        return self.paths.locks / f"output-{key}.lock"

    async def generated(self) -> GeneratedText:
        """The configured llama-swap file's text, whether it has the shape llama-swap needs,
        and whether it is what ``generate`` would write now (``generate --check``)."""
        from ..emit.verify import check_config
        from ..errors import BackendmgrError, InvalidInput

        target = self.output_path(await self.settings())

        def read() -> str | None:
            try:
                with target.open("rb") as f:
                    raw = f.read(MAX_SHOWN + 1)
            except FileNotFoundError:
                return None
            if len(raw) > MAX_SHOWN:
                raise InvalidInput(f"{target} is larger than {MAX_SHOWN >> 20} MiB")
            return raw.decode("utf-8", errors="replace")

        text = await anyio.to_thread.run_sync(read)
        if text is None:
            return GeneratedText(
                output=str(target),
                exists=False,
                text="",
                valid=False,
                problems=[],
                up_to_date=False,
                status=f'{target} does not exist; run "backendmgr generate"',
            )
        problems = await anyio.to_thread.run_sync(check_config, text, None)
        try:
            status, fresh = (await self.generate(check=True)).message, True
        except BackendmgrError as exc:
            status, fresh = str(exc), False
        return GeneratedText(
            output=str(target),
            exists=True,
            text=text,
            valid=not problems,
            problems=list(problems),
            up_to_date=fresh,
            status=status,
        )

    def _check_output(self, settings: Settings) -> tuple[list[str], list[str]]:
        """``doctor``: the written config must parse, have the shape llama-swap needs, and,
        when its header claims the current inputs, hold exactly the planned models and cmds."""
        from ..emit.plan import Entry
        from ..emit.regen import output_hash
        from ..emit.verify import check_config

        target = self.output_path(settings)
        if not target.exists():
            return [], [f'the llama-swap config {target} does not exist; run "backendmgr generate"']
        notes: list[str] = []
        entries: list[Any] | None = None
        recorded = output_hash(target)
        if recorded is None:
            notes.append(f"{target} was not written by backendmgr")
        else:
            _, plans, digest = self._pipeline(settings)
            if recorded == digest:
                entries = [p for p in plans if isinstance(p, Entry)]
            else:
                notes.append(f'{target} is stale; run "backendmgr generate"')
        try:
            text = target.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            return [f"the llama-swap config {target} cannot be read ({exc})"], notes
        problems = [
            f'the llama-swap config {target}: {p}; run "backendmgr generate --force"'
            for p in check_config(text, entries)
        ]
        return problems, notes

    async def regenerate(self) -> list[str]:
        """Bring the registry in line with the disk, then rewrite the llama-swap config; the
        rewrite's warnings go into the result of the change that caused it."""
        await self.sync_registry()
        return (await self.generate()).warnings


def _folder_problems(dirs: list[str]) -> list[str]:
    if not dirs:
        return ["models_dirs is empty; add the folders that hold your models to the config"]
    problems = []
    for top in dirs:
        path = os.path.expanduser(top)
        if not os.path.exists(path):
            problems.append(f"models_dirs: {top} does not exist")
        elif not os.path.isdir(path):
            problems.append(f"models_dirs: {top} is not a folder")
        elif not os.access(path, os.R_OK | os.X_OK):
            problems.append(f"models_dirs: {top} cannot be read")
    return problems
