"""``bisect MODEL --good TAG --bad TAG``: the first release that made a model slower (or stop
starting), found over prebuilt releases.

The releases between the two tags come from the release listing, in the activated variant of the
component the model runs on. Both ends are measured first (the bad one must be bad: slower than
the good one beyond ``threshold`` percent of generation speed, or, for ``starts``, not starting),
then the middle of what is left, so at most ⌈log2 n⌉ + 2 builds are measured; only those not
installed already are installed, and they are removed at the end (even when cancelled) unless
``keep``. Each measurement is ``bench``'s (a start exactly as llama-swap would, the fixed
prompt), and nothing is recorded: a bisect's builds are transient. The report is Markdown,
ready to file: the first bad and last good release with their figures, the exact command lines
and the host.
"""

from __future__ import annotations

import platform
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Literal

from .._commit import undoing
from .._version import __version__
from ..api_models import BisectReport
from ..errors import Refused, UsageError
from ..immutable import frozen
from ..measure.results import BenchResult
from ..measure.tuned import device_of
from ..requests import InstallRequest, ReleasesQuery, UninstallRequest
from ..run_requests import BenchRequest, BisectRequest

if TYPE_CHECKING:
    from ..config.models import Settings
    from ..install.builds import BuildStore
    from .bench import BenchService
    from .install import Installer
    from .measure import MeasureService
    from .probe import Site
    from .releases import Releases
    from .uninstall import Uninstaller

__all__ = ["Bisect", "BisectReport", "OnStep"]

OnStep = Callable[[str, BenchResult], None]
"""Hears each release measured: its tag, the figures."""

Metric = Literal["speed", "starts"]
LISTING_LIMIT = 100


def _shown(tag: str, r: BenchResult) -> dict[str, Any]:
    keys = ("build", "ok", "prompt_per_second", "predicted_per_second", "predicted_spread")
    return {"tag": tag, **{k: getattr(r, k) for k in keys}, "reason": r.reason, "argv": r.argv}


@frozen
class Bisect:
    """``bisect`` over the services it drives (releases, install, bench, uninstall)."""

    site: Site
    builds: BuildStore
    settings: Callable[[], Awaitable[Settings]]
    measure: MeasureService
    bench: BenchService
    releases: Releases
    installer: Installer
    uninstaller: Uninstaller

    async def run(self, req: BisectRequest, *, on_step: OnStep | None = None) -> BisectReport:
        """The first bad release between ``good`` and ``bad`` for the model."""
        model_id, good, bad, metric = req.model, req.good, req.bad, req.metric
        threshold = req.threshold
        settings = await self.settings()
        here = await self.measure._plan(settings, model_id)
        res = getattr(here.planned, "resolution", None)
        row = res.row if res is not None else None
        component = row.component if row is not None and row.managed else None
        activated = settings.row(component) if component else None
        if component is None or activated is None or not activated.variant:
            raise Refused(
                f"{model_id} does not run on an installed build's component; cannot bisect"
            )
        variant = activated.variant
        listing = await self.releases.recent(
            ReleasesQuery(component=component, variant=variant, limit=LISTING_LIMIT, refresh=True)
        )
        tags = [r.tag for r in reversed(listing) if variant in r.variants]  # oldest first
        for tag, flag in ((good, "--good"), (bad, "--bad")):
            if tag not in tags:
                raise UsageError(
                    f"{flag} {tag}: no {component} release of that tag ships {variant} "
                    f"(among the newest {LISTING_LIMIT}; see backendmgr releases {component})"
                )
        lo, hi = tags.index(good), tags.index(bad)
        span = hi - lo + 1
        if lo >= hi:
            raise UsageError(f"--good {good} must be an older release than --bad {bad}")
        installed_here: list[str] = []
        measured: dict[str, BenchResult] = {}
        removed: list[str] = []

        async def measure(tag: str) -> BenchResult:
            build = f"{component}@{tag}-{variant}"
            if not any(e.id == build for e in self.builds.installed(component)):
                await self.installer.install(
                    InstallRequest(
                        component=component, version=tag, variant=variant, generate=False
                    )
                )
                installed_here.append(build)
            starts = metric == "starts"
            once = BenchRequest(
                models=[model_id],
                builds=[build],
                repeat=1 if starts else req.repeat,
                prompt_words=req.prompt_words,
                tokens=1 if starts else req.tokens,
                timeout=req.timeout,
            )
            report = await self.bench.bench(once, record=False)
            measured[tag] = report.results[0]
            if on_step is not None:
                on_step(tag, report.results[0])
            return report.results[0]

        try:
            base = await measure(good)
            if not base.ok or base.predicted_per_second is None:
                raise Refused(f"--good {good} does not serve {model_id}: {base.reason}")
            speed = base.predicted_per_second

            def is_bad(r: BenchResult) -> bool:
                if not r.ok or r.predicted_per_second is None:
                    return True
                return metric == "speed" and r.predicted_per_second < speed * (1 - threshold / 100)

            if not is_bad(await measure(bad)):
                raise Refused(
                    f"--bad {bad} is not bad: {model_id} starts on it"
                    if metric == "starts"
                    else f"--bad {bad} is not bad: {measured[bad].predicted_per_second:g} t/s "
                    f"against {speed:g} t/s on {good} (threshold {threshold:g} %)"
                )
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if is_bad(await measure(tags[mid])):
                    hi = mid
                else:
                    lo = mid
        finally:
            if installed_here and not req.keep:
                async with undoing():  # Ctrl-C held: a second one must not stop it halfway
                    request = UninstallRequest(builds=list(installed_here))
                    done = await self.uninstaller.uninstall(request)
                    removed = list(done.ids)
        first_bad, last_good = tags[hi], tags[lo]
        figures = [_shown(t, measured[t]) for t in tags if t in measured]
        report = BisectReport(
            message=f"{model_id}: first bad release {first_bad} (last good {last_good})",
            changed=bool(installed_here) and req.keep,
            model=model_id,
            metric=metric,
            threshold=threshold,
            first_bad=_shown(first_bad, measured[first_bad]),
            last_good=_shown(last_good, measured[last_good]),
            figures=figures,
            installs=installed_here,
            removed=removed,
            releases=span,
            report="",
        )
        report.report = markdown(report, device_of(self.site))
        return report


def _cell(value: Any) -> str:
    return "-" if value is None else f"{value:g}" if isinstance(value, float) else str(value)


def markdown(r: BisectReport, device: str) -> str:
    """The ready-to-file report."""
    from ..emit.plan import render_token

    what = "generation speed" if r.metric == "speed" else "whether it starts"
    lines = [
        f"## {r.model}: {what} regressed in {r.first_bad['tag']}",
        "",
        f"First bad release: **{r.first_bad['tag']}**; last good: **{r.last_good['tag']}** "
        f"({r.releases} releases bisected, {len(r.figures)} measured; "
        f"threshold {r.threshold:g} %).",
        "",
        "| release | starts | prompt t/s | generation t/s | spread % |",
        "|---|---|---|---|---|",
    ]
    for f in r.figures:
        lines.append(
            f"| {f['tag']} | {'yes' if f['ok'] else 'no'} | {_cell(f['prompt_per_second'])} | "
            f"{_cell(f['predicted_per_second'])} | {_cell(f['predicted_spread'])} |"
        )
    for label, f in (("last good", r.last_good), ("first bad", r.first_bad)):
        lines += ["", f"Command line ({label}, {f['tag']}):", "", "```sh"]
        lines.append(" ".join(render_token(t) for t in f["argv"]) or "(not started)")
        lines.append("```")
        if f.get("reason"):
            lines.append(f"It said: {f['reason']}")
    lines += [
        "",
        f"Host: {platform.system()} {platform.release()} {platform.machine()}, device {device}, "
        f"Python {platform.python_version()}, backendmgr {__version__}.",
    ]
    return "\n".join(lines) + "\n"
