"""The generated llama-swap config: ``generate``, ``generated``, doctor's check of the written
file, and the regeneration every change ends with (after adopting builds into the registry)."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from .._fs import folder_for
from .._inline import in_thread
from .._locks import hold
from ..config.models import Settings
from ..digest import sha256_hex
from ..errors import BackendmgrError, InvalidInput, VerificationError
from ..registry import rows as registry
from .context import Context

if TYPE_CHECKING:  # a change that does not regenerate (install --no-generate) loads none
    from ..api_models import GeneratedText, GenerateResult
    from ..emit.plan import Entry
    from ..requests import GenerateRequest
    from .findings import Finding
    from .models import Models, Plan
    from .rewrite import Rewrite

__all__ = ["Generator"]

T = TypeVar("T")

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
        adopted = self._adopted

        def change(s: Settings) -> tuple[Settings, bool]:
            new = adopted(s)
            return new, new is not s

        current = await self.ctx.settings()
        if await in_thread(adopted, current) is current:
            return False
        return await self.ctx.update(change)

    def _adopted(self, s: Settings) -> Settings:
        """``s`` with the rows the builds on disk make (``s`` itself when they are its own;
        blocking)."""
        rows = registry.adopt(
            s.backends, self.ctx.builds.installed_builds(), path_exists=lambda p: Path(p).exists()
        )
        return s if rows == s.backends else replace(s, backends=rows)

    async def change(
        self, change: Callable[[Settings], tuple[Settings, T]], *, generate: bool
    ) -> tuple[T, list[str], Plan | None]:
        """Apply ``change`` to the config and, with ``generate``, rewrite the llama-swap config
        from it, as one step under the config lock: the settings it makes (the registry
        following the builds on disk, as a regeneration's adoption makes it) are planned,
        rendered and checked, with the output and its record, before the config is written.
        A change the rewrite would refuse changes nothing; one that passes writes the config,
        then the output and its record. ``change``'s result, the rewrite's warnings, and the
        plan it wrote from (None without ``generate``): a change discovers once."""
        if not generate:
            return await self.ctx.update(change), [], None
        adopted = self._adopted

        def adopting(s: Settings) -> tuple[Settings, T]:
            new, result = change(s)
            return adopted(new), result

        result, (rewrite, plan) = await self.ctx.transact(adopting, self._rewrite_with)
        return result, rewrite.warnings, plan

    def _rewrite_with(
        self, settings: Settings, write_config: Callable[[], None]
    ) -> tuple[Rewrite, Plan]:
        """A change's rewrite, in the config lock's thread: ``settings`` (what the config will
        say) planned and staged under the output's lock, then ``write_config``, then the
        output (the config store puts the config back if that write fails)."""
        from filelock import FileLock, Timeout

        from ..config.store import LOCK_TIMEOUT_S
        from ..errors import Refused
        from .rewrite import stage

        target = self.ctx.output_path(settings)
        folder_for(target, "the llama-swap config")  # the config's own folder, first run
        try:
            with FileLock(self._output_lock(target), timeout=LOCK_TIMEOUT_S):
                self._tidy(target)
                plan = self.models.pipeline(settings)
                home, config = self.ctx.paths.home, self.ctx.store.path
                staged = stage(plan, target, home, force=False, config=config)
                write_config()
                staged.commit()
        except Timeout as exc:
            raise Refused(
                f"{target} is being written by another backendmgr process; try again when it ends"
            ) from exc
        return staged.rewrite, plan

    async def regenerate(self) -> list[str]:
        """Bring the registry in line with the disk, then rewrite the llama-swap config; the
        rewrite's warnings go into the result of the change that caused it."""
        await self.sync_registry()
        return (await self._generate(None, force=False, check=False))[0].warnings

    async def after(self, generate: bool) -> list[str]:
        """What a change that may regenerate adds to its result's warnings."""
        return await self.regenerate() if generate else []

    def _tidy(self, target: Path) -> None:
        """Under the output's lock: the temporary files of a write of it (or of its record)
        that was killed before its rename go with the next write."""
        from .._fs import remove_leftover_temps
        from ..emit.regen import written_record

        remove_leftover_temps(target, written_record(self.ctx.paths.home, target))

    def _output_lock(self, target: Path) -> Path:
        """One lock per output file (the file it resolves to, whatever link names it), kept
        under the data home: the folder that holds the llama-swap config is the user's, and
        gets nothing but the file (and a .bak)."""
        locks = self.ctx.paths.locks
        locks.mkdir(parents=True, exist_ok=True)
        real = os.path.realpath(target)
        return locks / f"output-{sha256_hex(real.encode())[:16]}.lock"

    async def generate(self, req: GenerateRequest) -> GenerateResult:
        """Rewrite the llama-swap config when its inputs changed (``force``: always)."""
        rewrite = (await self._generate(req.output, force=req.force, check=req.check))[0]
        return rewrite.result()

    async def _generate(
        self, output: str | None, *, force: bool, check: bool
    ) -> tuple[Rewrite, Plan]:
        """``generate``'s work, and the plan it wrote (or checked) the file from; a change's
        regeneration reads only the warnings, and makes no request or result class."""
        from filelock import FileLock

        target = self.ctx.output_path(await self.ctx.settings(), output)
        if output is not None and not target.parent.is_dir():
            # a typo in --output must not make folders (as root, anywhere)
            raise InvalidInput(
                f"the folder {target.parent} does not exist; create it or choose another --output"
            )
        folder_for(target, "the llama-swap config")  # the config's own folder, first run
        async with hold(FileLock(self._output_lock(target))):
            if not check:
                await in_thread(self._tidy, target)
            # re-read under the lock: the newest settings win
            plan = await self.models.plan()
            return await self._write(plan, target, force=force, check=check), plan

    async def _write(self, plan: Plan, target: Path, *, force: bool, check: bool) -> Rewrite:
        from .rewrite import rewrite_of, stage

        if check:
            await self._check(plan, target)
            return rewrite_of(plan, target, len(plan.entries()))
        home = self.ctx.paths.home
        staged = await in_thread(lambda: stage(plan, target, home, force=force))
        await in_thread(staged.commit)
        return staged.rewrite

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
        from ..emit.document import dump
        from ..emit.regen import hand_edit, read_current, read_record, written_record
        from ..emit.verify import check_config
        from ..errors import ConfigError
        from .findings import Finding
        from .rewrite import render

        config = f"the llama-swap config {target}"
        if not target.exists():
            return [Finding(f'{config} does not exist; run "backendmgr generate"', False)]
        found: list[Finding] = []
        current = read_current(target)  # read once: hand edit, header and text
        record = read_record(written_record(self.ctx.paths.home, target))
        edited = hand_edit(record, current)
        if edited is not None and current.header == plan.digest:  # what generate writes now?
            edited = hand_edit(record, current, dump(render(plan, plan.entries())).encode())
        if edited is not None:
            how = "may have been" if edited else "was"
            why = f" ({edited})" if edited else ""
            found.append(
                Finding(
                    f"{config} {how} modified since backendmgr wrote it{why}; "
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
