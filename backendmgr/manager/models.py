"""Discovered models and their plans: ``models``, ``cmd``, and the plan ``generate``,
``verify`` and ``doctor`` work from."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Final

from ..config.models import Settings
from ..config.paths import as_config_means
from ..emit.entries import screen
from ..emit.plan import Entry, Skip, plan_model
from ..emit.sizing import tuning_text
from ..errors import Refused, unknown
from ..record import plain
from .context import Context
from .facts import discover

if TYPE_CHECKING:  # what only ``models`` and ``cmd`` show is loaded by them (not by ``which``)
    from collections.abc import Callable, Sequence

    from ..api_models import CmdResult, ModelInfo
    from ..catalog.capabilities import CapabilityIndex
    from ..catalog.host import Adapter
    from ..discovery.models import DiscoveredModel, Discovery
    from ..emit.plan import ToolParsers
    from ..install.receipt import InstalledEntry
    from ..measure.store import BenchStore, TunedStore
    from .probe import Site
    from .verify_cache import VerifyCache

__all__ = ["Models", "Plan"]


class Plan:
    """Every discovered model planned against one reading of the settings (a plain class,
    immutable by type: a dataclass costs every read its ``__init__`` compiled)."""

    __slots__ = ("digest", "found", "plans", "settings")

    settings: Final[Settings]
    found: Final[Discovery]
    plans: Final[list[Entry | Skip]]
    digest: Final[str]  # of every input: the generated file's header records it

    def __init__(
        self, settings: Settings, found: Discovery, plans: list[Entry | Skip], digest: str
    ) -> None:
        self.settings = settings
        self.found = found
        self.plans = plans
        self.digest = digest

    def entries(self) -> list[Entry]:
        return [p for p in self.plans if isinstance(p, Entry)]

    def planned(self, model_id: str) -> Entry | Skip | None:
        return next(
            (p for m, p in zip(self.found.models, self.plans, strict=True) if m.id == model_id),
            None,
        )

    def ids(self) -> list[str]:
        return [m.id for m in self.found.models] + [s.id for s in self.found.skipped]


def _plan_one(
    settings: Settings,
    model: DiscoveredModel,
    card_gb: float | None,
    parsers: ToolParsers,
    caps: CapabilityIndex,
    gpus: Sequence[Adapter] = (),
) -> Entry | Skip:
    """One model's plan; arithmetic on a header's numbers that still fails skips that model
    with the reason rather than failing every other one (discovery already bounds them).
    ``gpus``: the host's adapters, for a model pinned to a ``device``."""
    try:
        planned = plan_model(settings, model, card_gb, parsers, caps, gpus)
    except (ArithmeticError, ValueError) as exc:
        return Skip(model.id, model.path, f"cannot size this model ({type(exc).__name__}: {exc})")
    # a name llama-swap would read as a macro leaves out this model, not every model (issue 28)
    return screen(planned, settings.llama_swap) if isinstance(planned, Entry) else planned


def _receipts_text(installed: Sequence[InstalledEntry]) -> list[str]:
    """Each receipt of a build that serves models, as the inputs hash reads it (a kindless
    tool, llama-swap, serves none: it changes nothing in the config). The receipts' module is
    loaded where a build is installed, and only there."""
    if not installed:
        return []
    from ..install.receipt import receipt_json

    return [receipt_json(e.receipt) for e in installed if e.receipt.kind]


class Models:
    def __init__(
        self,
        ctx: Context,
        site: Site,
        tuned: TunedStore,
        benched: Callable[[], BenchStore],
        verified: Callable[[], VerifyCache],
    ) -> None:
        self.ctx = ctx
        self.site = site  # the GPU probe, and what the measured figures are keyed by
        self.tuned = tuned
        # made when first asked: only ``models`` shows them (``which`` plans, never loads them)
        self._benched, self._verified = benched, verified

    @property
    def benched(self) -> BenchStore:
        return self._benched()

    @property
    def verified(self) -> VerifyCache:
        return self._verified()

    def adapters(self) -> tuple[Adapter, ...]:
        """This machine's GPUs (probed once), for a model pinned to a ``device`` (issue 24)."""
        return self.site.probe.host.adapters

    def pipeline(self, settings: Settings, only: str | None = None, *, digest: bool = True) -> Plan:
        """Discover, plan every model and hash the inputs (blocking, for a worker thread).

        ``only``: discover every model but plan just those with this id, and hash nothing
        (``which MODEL``). A model's plan depends on that model and the settings alone
        (:func:`_plan_one`, :func:`~backendmgr.measure.tuned.apply_tuned`), so it is the plan
        the whole run gives it; the digest is left empty, as it is with ``digest=False`` (a
        read: only ``generate`` writes it)."""
        from ..discovery.models import Discovery
        from ..emit.devices import uses_devices
        from .capabilities import capability_index

        ctx, probe = self.ctx, self.site.probe
        keep = None if only is None else only.__eq__  # the other models' ids, not records
        scan, found = discover(settings, ctx.store.path, ctx.paths.cache, keep=keep)
        installed = ctx.builds.installed()
        parsers = {e.id: e.receipt.tool_parsers for e in installed}  # what each vLLM registers
        caps = capability_index(settings, ctx.builds, ctx.paths.cache, on_wait=ctx.on_wait)
        gpus = probe.host.adapters if uses_devices(settings) else ()  # issue 24: device pins
        hashed = ""
        if only is None and digest:
            from ..emit.regen import inputs_hash

            receipts = _receipts_text(installed)
            receipts += [
                f"probed {p} {json.dumps(plain(c))}" for p, c in sorted(caps.by_path.items())
            ]
            receipts += [f"gpu {g!r}" for g in gpus]
            receipts.append(self.tuned.inputs_text())  # issue 22: measured contexts
            hashed = inputs_hash(settings, receipts, scan.inputs, probe.card_gb)
        if only is not None:
            found = Discovery(
                [m for m in found.models if m.id == only],
                [s for s in found.skipped if s.id == only],
                found.stopped,
            )

        def plan_one(s: Settings, m: DiscoveredModel) -> Entry | Skip:
            return _plan_one(s, m, probe.card_gb, parsers, caps, gpus)

        plans = [plan_one(settings, m) for m in found.models]
        records = self.tuned.records()
        if records:  # issue 22: a tuned context in place of the estimate
            from ..measure.tuned import apply_tuned  # its records' class: only where one is

            plans = apply_tuned(self.site, records, settings, found.models, plans, plan_one)
        return Plan(settings, found, plans, hashed)

    async def plan(self, only: str | None = None) -> Plan:
        """:meth:`pipeline` on the current settings, in a worker thread (for async callers)."""
        from .._inline import in_thread  # an async caller's: ``which`` and ``models`` load none

        return await in_thread(self.plan_now, only)

    def plan_now(self, only: str | None = None, *, digest: bool = True) -> Plan:
        """:meth:`pipeline` on the current settings, in this thread."""
        return self.pipeline(self.ctx.store.read(), only, digest=digest)

    def info(self) -> list[ModelInfo]:
        """Every discovered model as ``models`` shows it, sorted by id."""
        return self._info(self.plan_now(digest=False))

    def report(self) -> tuple[list[ModelInfo], list[str]]:
        """``models``: every discovered model as it shows them, sorted by id, and the warnings
        about the folders, from one walk: those that cannot be scanned, and where a walk's
        bound stopped one."""
        plan = self.plan_now(digest=False)
        problems = _folder_problems(plan.settings.models_dirs, self.ctx.store.path)
        return self._info(plan), [*problems, *plan.found.stopped]

    def _info(self, plan: Plan) -> list[ModelInfo]:
        from ..api_models import ModelBackend, ModelInfo
        from .verify_cache import verified_text

        cache = self.verified.read()
        benched = self.benched.records()
        if benched:  # issue 32: the records' class and fingerprints, where there are figures
            from ..measure.bench import shown_figures
        out = []
        for model, planned in zip(plan.found.models, plan.plans, strict=True):
            res = planned.resolution
            entry = planned if isinstance(planned, Entry) else None
            skipped = None if isinstance(planned, Entry) else planned.reason
            checked = self.verified.result(entry, cache) if entry is not None else None
            out.append(
                ModelInfo(
                    id=model.id,
                    path=model.path,
                    format=model.format,
                    class_=model.cls,
                    role=model.role,
                    size_gb=round(model.size_gb, 2),
                    backend=None
                    if res is None
                    else ModelBackend(
                        id=res.row.id if res.row else None,
                        kind=res.kind or "llama",
                        path=res.exe,
                        reason=res.reason,
                    ),
                    skipped=skipped,
                    notes=list(planned.notes),
                    est_vram_gb=entry.metadata.get("est_vram_gb") if entry is not None else None,
                    verified=checked,
                    verification=verified_text(checked) if entry is not None else None,
                    tuning=tuning_text(plan.settings, entry) if entry is not None else None,
                    bench=None
                    if entry is None
                    else shown_figures(self.site, benched, model)
                    if benched
                    else [],
                )
            )
        for skip in plan.found.skipped:
            out.append(
                ModelInfo(
                    id=skip.id,
                    path=skip.path,
                    format="gguf" if skip.path.lower().endswith(".gguf") else "hf",
                    class_=None,
                    role=None,
                    size_gb=None,
                    backend=None,
                    skipped=skip.reason,
                    notes=[],
                    est_vram_gb=None,
                    verified=None,
                    verification=None,
                )
            )
        return sorted(out, key=lambda m: m.id)

    def cmd(self, model_id: str) -> CmdResult:
        from ..api_models import CmdResult

        plan = self.plan_now(model_id)  # planned alone; every model only to name the ids
        planned = plan.planned(model_id)
        if isinstance(planned, Entry):
            return CmdResult(id=model_id, argv=planned.argv)
        if planned is not None:
            raise Refused(f"{model_id}: {planned.reason}")
        skipped = next((s for s in plan.found.skipped if s.id == model_id), None)
        if skipped is not None:
            raise Refused(f"{model_id} is skipped: {skipped.reason}")
        raise unknown(
            f'no model "{model_id}" was discovered',
            model_id,
            self.plan_now(digest=False).ids(),
            hint='see "backendmgr models"',
        )

    async def losing(self, row_ids: set[str]) -> list[str]:
        """Discovered models whose backend is one of ``row_ids`` (managed or build rows)."""
        from .._inline import in_thread

        models = await in_thread(self.info)
        return sorted(m.id for m in models if m.backend is not None and m.backend.id in row_ids)


def _folder_problems(dirs: list[str], config: Path) -> list[str]:
    if not dirs:
        return [
            f"no models folder: models_dirs in {config} is empty; add yours with "
            '"backendmgr models add-dir PATH"'
        ]
    problems = []
    for top in dirs:
        path = as_config_means(config, top)
        if not os.path.exists(path):
            problems.append(f"models_dirs: {top} does not exist")
        elif not os.path.isdir(path):
            problems.append(f"models_dirs: {top} is not a folder")
        elif not os.access(path, os.R_OK | os.X_OK):
            problems.append(f"models_dirs: {top} cannot be read")
    return problems
