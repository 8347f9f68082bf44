"""The generated llama-swap config: ``generate``, ``generated``, doctor's check of the written
file, and the regeneration every change ends with (after adopting builds into the registry)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._inline import in_thread
from .._locks import hold
from ..changes import generated
from ..config.models import BackendRow, Settings
from ..digest import sha256_hex
from ..errors import BackendmgrError, InvalidInput, VerificationError
from ..registry import rows as registry
from .context import Context

if TYPE_CHECKING:  # a change that does not regenerate (install --no-generate) loads none
    from ..api_models import GeneratedText, GenerateResult
    from ..emit.plan import Entry, Skip
    from ..emit.regen import Current
    from ..requests import GenerateRequest
    from .findings import Finding
    from .models import Models, Plan

__all__ = ["Generator"]

MAX_SHOWN = 4 << 20  # bytes of the generated config that ``generated`` returns


class Generator:
    def __init__(self, ctx: Context, models: Callable[[], Models]) -> None:
        self.ctx = ctx
        self._models = models

    @cached_property
    def models(self) -> Models:
        """The planner, made when a change first regenerates."""
        return self._models()

    async def sync_registry(self) -> bool:
        """Adoption (SPEC §3.2): managed and build rows follow the builds on disk. The config
        is edited (locked, parsed round trip, rendered) only when the rows change: most
        changes adopt nothing, and the settings read from the parsed snapshot say so."""
        builds = self.ctx.builds

        def adopted(s: Settings) -> list[BackendRow]:
            return registry.adopt(
                s.backends, builds.installed_builds(), path_exists=lambda p: Path(p).exists()
            )

        def change(s: Settings) -> tuple[Settings, bool]:
            rows = adopted(s)
            return replace(s, backends=rows), rows != s.backends

        current = await self.ctx.settings()
        if await in_thread(adopted, current) == current.backends:
            return False
        return await self.ctx.update(change)

    async def regenerate(self) -> list[str]:
        """Bring the registry in line with the disk, then rewrite the llama-swap config; the
        rewrite's warnings go into the result of the change that caused it."""
        return (await self.regenerated())[0]

    async def regenerated(self) -> tuple[list[str], Plan]:
        """``regenerate``, with the plan the file was written from: a change's own notes about
        its model (not discovered, a ctx above the trained one, a plan's note) are read from
        it, so a change discovers and plans once."""
        await self.sync_registry()
        rewrite, plan = await self._generate(None, force=False, check=False)
        return rewrite.warnings, plan

    async def after(self, generate: bool) -> list[str]:
        """What a change that may regenerate adds to its result's warnings."""
        return await self.regenerate() if generate else []

    def _output_lock(self, target: Path) -> Path:
        """One lock per output file, kept under the data home: the folder that holds the
        llama-swap config is the user's, and gets nothing but the file (and a .bak)."""
        locks = self.ctx.paths.locks
        locks.mkdir(parents=True, exist_ok=True)
        return locks / f"output-{sha256_hex(str(target).encode())[:16]}.lock"

    async def generate(self, req: GenerateRequest) -> GenerateResult:
        """Rewrite the llama-swap config when its inputs changed (``force``: always)."""
        rewrite = (await self._generate(req.output, force=req.force, check=req.check))[0]
        return rewrite.result()

    async def _generate(
        self, output: str | None, *, force: bool, check: bool
    ) -> tuple[_Rewrite, Plan]:
        """``generate``'s work, and the plan it wrote (or checked) the file from; a change's
        regeneration reads only the warnings, and makes no request or result class."""
        from filelock import FileLock

        target = self.ctx.output_path(await self.ctx.settings(), output)
        if output is not None and not target.parent.is_dir():
            # a typo in --output must not make folders (as root, anywhere)
            raise InvalidInput(
                f"the folder {target.parent} does not exist; create it or choose another --output"
            )
        target.parent.mkdir(parents=True, exist_ok=True)  # the config's own folder, first run
        async with hold(FileLock(self._output_lock(target))):
            # re-read under the lock: the newest settings win
            plan = await self.models.plan()
            return await self._write(plan, target, force=force, check=check), plan

    async def _write(self, plan: Plan, target: Path, *, force: bool, check: bool) -> _Rewrite:
        from .._fs import atomic_write_bytes
        from .._version import __version__
        from ..emit.document import build_document, dump
        from ..emit.plan import Skip
        from ..emit.regen import (
            edited_by_hand,
            keep_copy,
            read_current,
            record_written,
            written_record,
        )
        from ..emit.verify import reread_emitted

        entries = plan.entries()
        skipped = [p for p in plan.plans if isinstance(p, Skip)]
        skipped += [Skip(s.id, s.path, s.reason) for s in plan.found.skipped]
        result = _Rewrite(target, len(entries), skipped)
        if check:
            await self._check(plan, target)
            return result
        # the file as it is now, read and hashed once: hand edits, its header, its entries
        current = await in_thread(read_current, target)
        record = written_record(self.ctx.paths.home, target)
        edited = await in_thread(edited_by_hand, record, target, current)
        if current.header == plan.digest and not force and not edited:
            return result
        document = build_document(
            version=__version__,
            inputs_hash=plan.digest,
            health_check_timeout=plan.settings.health_check_timeout,
            passthrough=plan.settings.llama_swap,
            entries=entries,
            skipped=skipped,
        )
        text = dump(document)
        # what llama-swap would read: the text re-read, its shape, its macros (issue 28)
        data, wrong = reread_emitted(document, text)
        if wrong or data is None:
            raise VerificationError(
                f"the llama-swap config would be invalid: {wrong[0]}; {target} is unchanged"
            )
        if edited and target.is_file():
            backup = await in_thread(keep_copy, target)
            result.backup = str(backup)
            result.warnings.append(f"{target} was modified by hand; kept that copy as {backup}")
        body = text.encode()
        digest = sha256_hex(body)
        models = data.get("models")
        new = models if isinstance(models, dict) else {}
        before = await in_thread(_old_models, record, target, current)
        await in_thread(atomic_write_bytes, target, body)
        await in_thread(record_written, record, digest)
        await in_thread(_keep_models, record, target, body, digest, new)
        result.written = True
        result.models_changed = _changed_models(before, new)
        generated(target, result.models_changed)
        result.message = f"wrote {target}: {len(entries)} models, {len(skipped)} skipped"
        return result

    async def _check(self, plan: Plan, target: Path) -> None:
        """``generate --check``: refuse a hand-edited, missing, stale or drifted file."""
        found = await in_thread(self.inspect, plan, target)
        if found:
            raise found[0].error(found[0].text)

    def inspect(self, plan: Plan, target: Path) -> list[Finding]:
        """What ``generate --check`` refuses and ``doctor`` reports, worst first: a missing,
        hand-edited, foreign or stale file, and one that lacks the shape llama-swap needs or
        (when its header claims the current inputs) does not say what the plan says. Blocking,
        for a worker thread."""
        from .._yaml import read_limited
        from ..emit.regen import edited_by_hand, read_current, written_record
        from ..emit.verify import check_config
        from ..errors import ConfigError
        from .findings import Finding

        config = f"the llama-swap config {target}"
        if not target.exists():
            return [Finding(f'{config} does not exist; run "backendmgr generate"', False)]
        found: list[Finding] = []
        current = read_current(target)  # read once: hand edit, header and text
        if edited_by_hand(written_record(self.ctx.paths.home, target), target, current):
            found.append(
                Finding(
                    f"{config} was modified since backendmgr wrote it; "
                    '"backendmgr generate" rewrites it and keeps your copy as .bak',
                    True,
                )
            )
        entries: list[Entry] | None = None
        recorded = current.header
        if recorded is None:
            found.append(
                Finding(f'{config} was not written by backendmgr; run "backendmgr generate"', False)
            )
        elif recorded != plan.digest:
            found.append(Finding(f'{config} is stale; run "backendmgr generate"', False))
        else:
            entries = plan.entries()
        try:  # read again only where it was not read whole: the error to say
            raw = current.raw if current.raw is not None else read_limited(target)
            text = raw.decode("utf-8")
        except (OSError, UnicodeDecodeError, ConfigError) as exc:
            return [*found, Finding(f"{config} cannot be read ({exc})", True, VerificationError)]
        differs = "does not match its plan: " if entries is not None else ""
        found += [
            Finding(
                f'{config} {differs}{p}; run "backendmgr generate --force"', True, VerificationError
            )
            for p in check_config(text, entries, plan.settings.llama_swap)
        ]
        return found

    async def generated(self) -> GeneratedText:
        """The configured llama-swap file's text, whether it has the shape llama-swap needs,
        and whether it is what ``generate`` would write now (``generate --check``)."""
        from .._fs import read_regular
        from ..api_models import GeneratedText
        from ..emit.verify import check_config
        from ..requests import GenerateRequest

        target = self.ctx.output_path(await self.ctx.settings())

        def read() -> str | None:
            try:
                raw = read_regular(target, MAX_SHOWN)
            except FileNotFoundError:
                return None
            except OSError as exc:  # a FIFO or a device in its place is not waited on
                if exc.errno is not None:
                    raise
                raise InvalidInput(f"{target} is not a regular file") from None
            if len(raw) > MAX_SHOWN:
                raise InvalidInput(f"{target} is larger than {MAX_SHOWN >> 20} MiB")
            return raw.decode("utf-8", errors="replace")

        text = await in_thread(read)
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
        problems = await in_thread(check_config, text, None)
        try:
            status, fresh = (await self.generate(GenerateRequest(check=True))).message, True
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


class _Rewrite:
    """What one run of ``generate`` did, before it is a :class:`GenerateResult`: a change's
    regeneration reads only its warnings, and loads no result class for them."""

    __slots__ = (
        "backup",
        "message",
        "models",
        "models_changed",
        "skipped",
        "target",
        "warnings",
        "written",
    )

    def __init__(self, target: Path, models: int, skipped: list[Skip]) -> None:
        self.target = target
        self.models = models
        self.skipped = skipped
        self.message = f"{target} is up to date"
        self.written = False
        self.backup: str | None = None
        self.models_changed: list[str] | None = None  # set when the file is written
        self.warnings: list[str] = []

    def result(self) -> GenerateResult:
        """``generate``'s result: the keys a document shows are those the run set."""
        from ..api_models import GenerateResult, SkippedModel

        done: dict[str, Any] = {}
        if self.backup is not None:
            done["backup"] = self.backup
        if self.written:
            done["models_changed"] = self.models_changed
        result = GenerateResult(
            message=self.message,
            changed=self.written,
            output=str(self.target),
            written=self.written,
            models=self.models,
            skipped=[
                SkippedModel(id=s.id, reason=s.reason)
                for s in sorted(self.skipped, key=lambda s: s.id)
            ],
            **done,
        )
        result.warn(*self.warnings)
        return result


def _parsed_path(record: Path) -> Path:
    """Where the models of the file last written are kept, parsed, beside its record."""
    return record.with_name(record.stem + ".parsed.json")


def _old_models(record: Path, target: Path, current: Current) -> dict[str, Any] | None:
    """The models of the file about to be replaced (``current``: its bytes, read once), to
    say which entries changed: the kept parse when its bytes are those backendmgr wrote, else
    the file parsed (bounded). An absent or unreadable file has none; None: it is no YAML
    mapping of models."""
    from .._yaml import parser_name
    from ..config.snapshot import load_parsed

    if current.raw is None or current.digest is None:
        return {}
    parser = f"{parser_name()} safe"
    kept = load_parsed(_parsed_path(record), target, current.raw, parser, digest=current.digest)
    if kept is not None:
        return kept
    return _models_of(current.raw.decode("utf-8", "replace"))


def _keep_models(
    record: Path, target: Path, body: bytes, digest: str, models: dict[str, Any]
) -> None:
    """Keep what was just written as parsed (an input of the next rewrite's comparison,
    stamped with ``digest``, the SHA-256 of ``body``, the bytes it came from: a hand edit or
    another version is parsed again). ``models`` is what the text was proved to read back
    as: plain data."""
    from .._yaml import parser_name
    from ..config.snapshot import save_parsed

    parser = f"{parser_name()} safe"
    save_parsed(_parsed_path(record), target, body, parser, models, digest=digest, plain=True)


def _models_of(text: str) -> dict[str, Any] | None:
    """The models of a file backendmgr did not just write (a hand edit): bounded first, as any
    user YAML is (libyaml's composer would crash the process on a deep enough nesting)."""
    from .._yaml import load_yaml

    try:
        data = load_yaml(text, "the llama-swap config")
    except Exception:  # a file edited into nonsense: every entry counts as changed
        return None
    models = data.get("models") if isinstance(data, dict) else None
    return models if isinstance(models, dict) else None


def _changed_models(old: dict[str, Any] | None, new: dict[str, Any]) -> list[str]:
    """The ids whose llama-swap entries the rewrite added, removed or changed (``old``
    None: the old file was no mapping of models, so every entry counts)."""
    if old is None:
        return sorted(new)
    return sorted(str(k) for k in set(old) | set(new) if old.get(k) != new.get(k))
