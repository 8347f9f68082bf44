"""The requests of the operations that start servers: ``tune``, ``verify --repair``, ``bench``,
the canary, ``bisect``, llama-swap's ``up``, ``service`` and ``status``, and ``serve``.

Declared as every request is (:mod:`backendmgr.requests`): each field once, with its help,
spelling, default and limits; the CLI's options are generated from them. A module of its own
only to keep each module small.
"""

from dataclasses import dataclass, field
from typing import Annotated

from .limits import (
    BENCH_PROMPT,
    BENCH_REPEAT,
    BENCH_TOKENS,
    CANARY_TOLERANCE,
    PORT,
    TUNE_ATTEMPTS,
    TUNE_BUDGET_GB,
    TUNE_DEADLINE_DEFAULT_S,
    TUNE_DEADLINE_S,
    VERIFY_TIMEOUT_S,
)
from .requests import (
    MAX_BUILDS,
    MAX_ID,
    MAX_MODELS,
    NO_GENERATE,
    Arg,
    Request,
    VerifyRequest,
    args_of,
)

__all__ = [
    "DEFAULT_LISTEN",
    "SERVE_HOST",
    "SERVE_PORT",
    "SERVICE_ACTIONS",
    "BenchRequest",
    "BisectRequest",
    "CanaryRequest",
    "RepairRequest",
    "ServeRequest",
    "ServiceRequest",
    "StatusRequest",
    "TuneRequest",
    "UpRequest",
]

DEFAULT_LISTEN = "127.0.0.1:8080"  # llama-swap's own port, on loopback
SERVE_HOST, SERVE_PORT = "127.0.0.1", 8577  # backendmgr serve's page and API
SERVICE_ACTIONS = ("install", "start", "stop", "restart", "status", "uninstall")

MODELS = Arg("model ids", positional=True, metavar="MODEL", low=1, high=MAX_MODELS)
START_TIMEOUT = Arg("seconds to become healthy, per start", metavar="S", bounds=VERIFY_TIMEOUT_S)
# how each (model, build) is measured: bench's, the canary's and bisect's
REPEAT = Arg(
    "runs per model and build; the median and spread are over them (%(default)s)",
    metavar="N",
    bounds=BENCH_REPEAT,
)
PROMPT = Arg(
    "words of the fixed prompt, about a token each (%(default)s)",
    flag="--prompt",
    metavar="WORDS",
    bounds=BENCH_PROMPT,
)
TOKENS = Arg("tokens generated per run (%(default)s)", metavar="N", bounds=BENCH_TOKENS)
RUNS, WORDS, GENERATED = 3, 256, 64  # their defaults


@dataclass(frozen=True, slots=True, kw_only=True)
class TuneRequest(Request):
    models: Annotated[list[str], MODELS]
    budget_gb: Annotated[
        float | None,
        Arg(
            "memory budget (default: the model's or card)",
            flag="--budget",
            metavar="GiB",
            bounds=TUNE_BUDGET_GB,
        ),
    ] = None
    max_attempts: Annotated[
        int,
        Arg("starts per model (%(default)s, at most {high})", metavar="N", bounds=TUNE_ATTEMPTS),
    ] = 8  # 4096 … 1M tokens is 256 contexts: 8 halvings settle any of them
    timeout: Annotated[float | None, START_TIMEOUT] = None
    deadline: Annotated[
        float,
        Arg(
            "seconds for the whole run, every start included (%(default)s); the search stops "
            "there with the largest context found so far",
            metavar="S",
            bounds=TUNE_DEADLINE_S,
        ),
    ] = TUNE_DEADLINE_DEFAULT_S
    generate: Annotated[bool, NO_GENERATE] = True


_VERIFY = dict(args_of(VerifyRequest))


@dataclass(frozen=True, slots=True, kw_only=True)
class RepairRequest(Request):
    """``verify --repair``: its models and timeout are verify's."""

    models: Annotated[list[str], _VERIFY["models"]] = field(default_factory=list)
    timeout: Annotated[float | None, _VERIFY["timeout"]] = None
    dry_run: Annotated[bool, Arg("with --repair: report, change nothing")] = False


@dataclass(frozen=True, slots=True, kw_only=True)
class BenchRequest(Request):
    models: Annotated[list[str], MODELS]
    builds: Annotated[
        list[str],
        Arg(
            "a build id or a release tag of the activated variant (repeatable; "
            "default: the build each model resolves to)",
            flag="--build",
            metavar="B",
            high=MAX_BUILDS,
        ),
    ] = field(default_factory=list)
    repeat: Annotated[int, REPEAT] = RUNS
    prompt_words: Annotated[int, PROMPT] = WORDS
    tokens: Annotated[int, TOKENS] = GENERATED
    timeout: Annotated[float | None, START_TIMEOUT] = None


@dataclass(frozen=True, slots=True, kw_only=True)
class CanaryRequest(Request):
    """``activate BUILD --canary MODEL…``; ``update --canary`` names the newest build."""

    build: Annotated[str, Arg("COMPONENT@VERSION-VARIANT", positional=True, low=1, high=MAX_ID)]
    models: Annotated[
        list[str],
        Arg(
            "move only these models first, verify and bench them on both builds, then "
            "promote (activate) or roll back",
            flag="--canary",
            metavar="MODEL",
            low=1,
            high=MAX_MODELS,
        ),
    ]
    tolerance: Annotated[
        float,
        Arg(
            "with --canary: how much slower (percent) the new build may be (%(default)s)",
            metavar="PCT",
            bounds=CANARY_TOLERANCE,
        ),
    ] = 5.0
    repeat: Annotated[int, REPEAT] = RUNS
    prompt_words: Annotated[int, PROMPT] = WORDS
    tokens: Annotated[int, TOKENS] = GENERATED
    timeout: Annotated[float | None, START_TIMEOUT] = None


@dataclass(frozen=True, slots=True, kw_only=True)
class BisectRequest(Request):
    model: Annotated[str, Arg("model id", positional=True, metavar="MODEL", low=1, high=MAX_ID)]
    good: Annotated[str, Arg("a release that was good", metavar="TAG", low=1, high=MAX_ID)]
    bad: Annotated[str, Arg("a later release that is bad", metavar="TAG", low=1, high=MAX_ID)]
    metric: Annotated[
        str,
        Arg(
            "what makes a release bad: slower generation (speed) or not starting (starts)",
            choices=("speed", "starts"),
        ),
    ] = "speed"
    threshold: Annotated[
        float,
        Arg(
            "with --metric speed: slower than the good release by more than this (%(default)s)",
            metavar="PCT",
        ),
    ] = 10.0
    keep: Annotated[bool, Arg("keep the builds installed for the search")] = False
    repeat: Annotated[int, REPEAT] = RUNS
    prompt_words: Annotated[int, PROMPT] = WORDS
    tokens: Annotated[int, TOKENS] = GENERATED
    timeout: Annotated[float | None, START_TIMEOUT] = None

    def rule(self) -> str | None:
        if not 0 < self.threshold < 100:
            return f"--threshold must be above 0 and below 100 percent, not {self.threshold:g}"
        return None


LISTEN = Arg("HOST:PORT llama-swap listens on (%(default)s)", metavar="ADDR", high=300)
PUBLIC = Arg(
    "allow an address beyond loopback (llama-swap has no authentication unless its config "
    "sets apiKeys)"
)


@dataclass(frozen=True, slots=True, kw_only=True)
class UpRequest(Request):
    listen: Annotated[str, LISTEN] = DEFAULT_LISTEN
    public: Annotated[bool, PUBLIC] = False
    replace: Annotated[
        bool,
        Arg("stop the llama-swap another up runs on this config first (else up refuses)"),
    ] = False


@dataclass(frozen=True, slots=True, kw_only=True)
class ServiceRequest(Request):
    action: Annotated[
        str, Arg("what to do with the service", positional=True, choices=SERVICE_ACTIONS)
    ]
    listen: Annotated[str, LISTEN] = DEFAULT_LISTEN
    public: Annotated[bool, PUBLIC] = False


@dataclass(frozen=True, slots=True, kw_only=True)
class StatusRequest(Request):
    """``status`` takes nothing: whether llama-swap runs, and what it serves."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ServeRequest(Request):
    """``serve``: the page and HTTP API over the same operations."""

    host: Annotated[str, Arg("address to listen on (%(default)s)", high=300, blank=False)] = (
        SERVE_HOST
    )
    port: Annotated[int, Arg("port (%(default)s; 0 picks a free one)", bounds=PORT)] = SERVE_PORT
    open: Annotated[bool, Arg("open the page in a browser")] = False
    token: Annotated[
        str | None,
        Arg(
            "use this secret (16+ characters of A-Z a-z 0-9 . _ ~ -) instead of the data "
            "home's; needed to listen beyond loopback. BACKENDMGR_TOKEN is safer: a command "
            "line is visible to other users",
            high=4096,
        ),
    ] = None
