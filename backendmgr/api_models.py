"""Typed shapes of what the CLI's ``--json`` prints and the HTTP API returns.

The Manager's read operations return these results; the CLI's ``--json``, its tables and the
HTTP API all serialise them with :func:`dump`, and a test holds the CLI's ``--json`` to the
same classes, so the two cannot drift apart. Mutations return an :class:`Outcome` subclass,
which carries the human ``message`` beside the data. The keys are SPEC §13's; a result (a
standard-library dataclass, :class:`Result`) takes no keyword it does not name, so a misspelt
field is an error where the result is built, not a key that quietly appears.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any, Self

# imported at run time, not only for mypy: pydantic resolves them for the OpenAPI schemas
from .catalog.capabilities import Capabilities
from .config.models import BackendRow, Settings
from .measure.reasons import FailureCause, cause_text
from .record import After, instant, plain
from .results import EVERY, Outcome, Result, dump, extra_keys

__all__ = [
    "ActivateResult",
    "AssetInfo",
    "BackendRowInfo",
    "BackendRowResult",
    "BisectReport",
    "BuildInfo",
    "BuildOutcome",
    "CacheCleanResult",
    "CanaryReport",
    "CatalogEntry",
    "CmdResult",
    "ConfigInfo",
    "DoctorReport",
    "ErrorBody",
    "FetchResult",
    "GenerateResult",
    "GeneratedText",
    "InstallResult",
    "JobInfo",
    "LockResult",
    "ModelBackend",
    "ModelInfo",
    "ModelSettingsResult",
    "ModelsDirResult",
    "PinResult",
    "Previewed",
    "PruneResult",
    "ReleaseInfo",
    "RemovedRow",
    "SkippedModel",
    "SyncResult",
    "UninstallResult",
    "UpdateEntry",
    "UpdateResult",
    "VariantHere",
    "VerifyReport",
    "VerifyResult",
    "WhichResult",
    "dump",
    "extra_keys",
]


@dataclass(kw_only=True)
class VariantHere(Result):
    id: str
    available: bool
    runs_here: bool = True
    why_not: str | None = None  # why this host cannot run it (no GPU of the vendor it needs)


@dataclass(kw_only=True)
class CatalogEntry(Result):
    id: str
    name: str
    kind: str
    source: str
    variants: list[VariantHere]
    suggested: str | None
    why: str
    installed: list[str]
    activated: str | None


@dataclass(kw_only=True)
class ReleaseInfo(Result):
    tag: str
    published_at: str | None
    prerelease: bool
    variants: list[str]
    installed: list[str]
    activated: str | None
    runs_here: list[str] | None = None  # of ``variants``, those this host's GPUs can run


@dataclass(kw_only=True)
class BuildInfo(Result):
    id: str
    component: str
    version: str
    variant: str
    activated: bool
    path: str
    dir: str
    size_bytes: int | None
    installed_at: str
    sha256: str | None
    verified_by: str | None
    pinned_by: list[str]
    capabilities: Capabilities | None = None  # what its --help listed at install


@dataclass(kw_only=True)
class BackendRowInfo(Result):
    id: str
    kind: str
    name: str
    path: str
    default: bool
    managed: bool
    component: str
    version: str
    variant: str
    build: bool
    classes: list[str]
    capabilities: Capabilities | None = None  # the row's build, or a manual row's probe

    @classmethod
    def of(cls, row: BackendRow, **more: Any) -> Self:
        """A registry row as shown: its fields, the classes its kind serves, and ``more`` (the
        capabilities; a result's message)."""
        from .registry.kinds import classes_of

        return cls(**plain(row), classes=sorted(classes_of(row.kind)), **more)


@dataclass(kw_only=True)
class ModelBackend(Result):
    id: str | None
    kind: str
    path: str | None
    reason: str


@dataclass(kw_only=True)
class VerifyResult(Result):
    """One model's run: whether it served, why not, how long it took and what it used."""

    id: str
    ok: bool
    reason: str | None
    ready_s: float | None
    gpu_gib: float | None
    est_vram_gb: float | None
    backend: str | None = None
    verified_at: Annotated[str | None, After(instant)] = None  # as verify writes it
    device: str | None = None  # the GPU(s) the build said it loaded onto
    cause: FailureCause | None = None  # the recognised cause of a failure (issue 22)
    budget_gb: float | None = None  # what the model was sized for (issue 20)
    over_budget: str | None = None  # "more than the 16 GiB of vram_budget_gb", when it used more

    def line(self) -> str:
        """``qwen3: ok in 0.2 s, 6.31 GiB used, 6.37 GiB estimated`` or ``qwen3: failed: …``:
        the CLI prints it, and the page's job events carry it."""
        if not self.ok:
            return f"{self.id}: failed: {self.reason}" + cause_text(self.cause)
        parts = [f"ok in {self.ready_s or 0:.1f} s"]
        if self.gpu_gib is not None:
            parts.append(f"{self.gpu_gib:.2f} GiB used")
        if self.over_budget:
            parts.append(self.over_budget)
        if self.est_vram_gb is not None:
            parts.append(f"{self.est_vram_gb:.2f} GiB estimated")
        if self.device:
            parts.append(f"on {self.device}")
        return f"{self.id}: " + ", ".join(parts)


@dataclass(kw_only=True)
class ModelInfo(Result):
    id: str
    path: str
    format: str
    class_: str | None = field(metadata={"alias": "class"})
    role: str | None
    size_gb: float | None
    backend: ModelBackend | None
    skipped: str | None
    notes: list[str]
    est_vram_gb: float | None = None
    verified: VerifyResult | None = None  # the last `verify` result for this exact command
    verification: str | None = None  # "verified today: ok in 1.0 s, 6.31 GiB" / "not verified"
    tuning: str | None = None  # "ctx 16384 from tuning: …" (issue 33: one sentence)
    bench: list[dict[str, Any]] | None = None  # issue 32: the last `bench` figures per build


@dataclass(kw_only=True)
class CmdResult(Result):
    id: str
    argv: list[str]

    def shell_line(self) -> str:
        """The command as a POSIX shell reads it; llama-swap macros like ``${PORT}`` stay."""
        from .emit.plan import render_token

        return " ".join(render_token(t) for t in self.argv)


@dataclass(kw_only=True)
class DoctorReport(Result):
    ok: bool
    problems: list[str]
    notes: list[str]
    fixed: list[str]
    gpus: list[str] = field(default_factory=list)  # "GPU 0: NVIDIA …, 24.0 GiB (nvidia)"


@dataclass(kw_only=True)
class WhichResult(Result):
    target: str
    type: str
    row: str | None
    path: str | None
    exists: bool
    reason: str
    notes: list[str]


@dataclass(kw_only=True)
class ConfigInfo(Result):
    config: str
    config_exists: bool
    output: str
    home: str
    builds: str
    downloads: str
    cache: str
    manifests: str
    # the config with every default filled in: all of them, defaults included (EVERY)
    settings: Settings | None = field(default=None, metadata=EVERY)


@dataclass(kw_only=True)
class AssetInfo(Result):
    """One downloaded (or, in a dry run, chosen) asset and how its bytes were checked."""

    name: str
    url: str
    size: int | None
    sha256: str | None
    verified_by: str | None


@dataclass(kw_only=True)
class BuildOutcome(Outcome):
    """What installing or activating a build says about it: the build and whether it is active."""

    id: str
    component: str
    version: str
    variant: str
    path: str
    activated: bool


@dataclass(kw_only=True)
class InstallResult(BuildOutcome):
    already_installed: bool
    assets: list[AssetInfo]
    python: str | None = None
    packages: dict[str, str] | None = None  # a venv build's distributions, name -> version
    capabilities: Capabilities | None = None  # what its --help listed (archive and venv builds)
    # a dry run says where and what it would install
    dry_run: bool | None = None
    dir: str | None = None
    release: str | None = None
    installer: str | None = None
    requirement: str | None = None
    pip_args: list[str] | None = None
    requires_python: str | None = None  # a venv build: the package's own Requires-Python
    interpreter: str | None = None  # the interpreter its venv is (or would be) made from


@dataclass(kw_only=True)
class Previewed(Outcome):
    """A change ``--dry-run`` can preview (issue 29): run up to the write, nothing written;
    ``changed`` is what the real run would report, ``diff`` the config file's unified diff."""

    dry_run: bool | None = None
    diff: str | None = None


@dataclass(kw_only=True)
class ActivateResult(BuildOutcome, Previewed):
    """The build that is now (or already was) its component's active one."""


@dataclass(kw_only=True)
class UninstallResult(Previewed):
    id: str | None
    ids: list[str]
    removed: bool
    rows_removed: list[str]
    models_fall_back: list[str]


@dataclass(kw_only=True)
class RemovedRow(Outcome):
    id: str
    removed: bool


@dataclass(kw_only=True)
class BackendRowResult(Outcome, BackendRowInfo):
    """``backends add`` and ``default``: the row as it now stands."""


@dataclass(kw_only=True)
class PinResult(Previewed):
    model: str
    backend: str | None


@dataclass(kw_only=True)
class ModelsDirResult(Previewed):
    """``models add-dir`` / ``models remove-dir``: the folder and ``models_dirs`` as stored."""

    path: str
    config: str
    models_dirs: list[str]


@dataclass(kw_only=True)
class ModelSettingsResult(Previewed):
    """``set``/``unset``: the model id and its overrides as stored (only those set)."""

    model: str
    backend: str | None = None
    ctx: int | None = None
    vram_target_gb: float | None = None
    vllm_gpu_util: float | None = None
    vllm_tensor_parallel: int | None = None
    vllm_tokenizer: str | None = None
    vllm_tool_parser: str | None = None
    extra_args: str | None = None
    unlisted: bool | None = None
    llama_swap: dict[str, Any] | None = None  # passed through to llama-swap as the user wrote it
    device: str | None = None  # "1", "0,1": the GPUs the model runs on (issue 24)
    env: list[str] | None = None  # KEY=VALUE words set after the device's variables


@dataclass(kw_only=True)
class SkippedModel(Result):
    id: str
    reason: str


@dataclass(kw_only=True)
class GenerateResult(Outcome):
    output: str
    written: bool
    models: int
    skipped: list[SkippedModel]
    backup: str | None = None
    models_changed: list[str] | None = None  # ids whose entries a rewrite changed (issue 33)


@dataclass(kw_only=True)
class UpdateEntry(Result):
    component: str
    variant: str
    from_: str | None = field(metadata={"alias": "from"})
    to: str
    action: str


@dataclass(kw_only=True)
class UpdateResult(Outcome):
    updates: list[UpdateEntry]
    dry_run: bool


@dataclass(kw_only=True)
class PruneResult(Outcome):
    removed: list[str]
    freed_bytes: int
    dry_run: bool


@dataclass(kw_only=True)
class CacheCleanResult(Outcome):
    freed_bytes: int
    release_listings: list[str]
    partial_downloads: list[str]
    leftovers: list[str]
    skipped_partial_downloads: bool
    dry_run: bool


@dataclass(kw_only=True)
class GeneratedText(Result):
    """The llama-swap config as it is on disk, and whether it is valid and up to date."""

    output: str
    exists: bool
    text: str
    valid: bool
    problems: list[str]
    up_to_date: bool
    status: str


@dataclass(kw_only=True)
class ErrorBody(Result):
    """Every error response: the CLI's one-line message and the exit status it would give."""

    error: str
    exit: int


@dataclass(kw_only=True)
class JobInfo(Result):
    id: str
    kind: str
    request: dict[str, Any]
    state: str
    events: int
    result: dict[str, Any] | None = None
    error: ErrorBody | None = None


@dataclass(kw_only=True)
class FetchResult(Outcome):
    dir: str
    fetched: list[str]
    present: list[str]


@dataclass(kw_only=True)
class LockResult(Outcome):
    path: str
    builds: list[str]
    activated: dict[str, str]
    fetch: FetchResult | None = None


@dataclass(kw_only=True)
class SyncResult(Outcome):
    lock: str
    install: list[str]
    reinstall: list[str]
    activate: list[str]
    remove: list[str]
    kept: list[str]
    dry_run: bool
    failed: dict[str, str] | None = None


@dataclass(kw_only=True)
class VerifyReport(Result):
    results: list[VerifyResult]
    failed: int
    # issue 20: the models a run that stops at its first failure did not reach
    unchecked: list[str] = field(default_factory=list)


@dataclass(kw_only=True)
class BisectReport(Outcome):
    """What ``bisect`` found: the first bad and last good release, every release measured,
    the builds it installed and removed, and the Markdown report."""

    model: str
    metric: str
    threshold: float
    first_bad: dict[str, Any]
    last_good: dict[str, Any]
    figures: list[dict[str, Any]] = field(default_factory=list)  # every release measured
    installs: list[str] = field(default_factory=list)  # builds installed for the search
    removed: list[str] = field(default_factory=list)
    releases: int  # how many releases the range holds
    report: str  # the Markdown


@dataclass(kw_only=True)
class CanaryReport(Outcome):
    """A canary switch: promoted or rolled back, with both builds' figures per canary."""

    promoted: bool
    build: str  # the new build
    previous: str  # the build the canaries ran on before
    tolerance: float  # percent
    models: list[str]
    comparison: list[dict[str, Any]] = field(default_factory=list)  # per canary: both figures
    verified: dict[str, bool] = field(default_factory=dict)
