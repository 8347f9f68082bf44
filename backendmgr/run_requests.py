"""The requests of the operations that start servers: ``tune``, ``verify --repair``, ``bench``,
``bisect``, and llama-swap's ``up``, ``service`` and ``status`` (the canary's and ``serve``'s
are in :mod:`backendmgr.requests`).

Declared as every request is (:mod:`backendmgr.contract`): each field once, with its help,
spelling, default and limits; the CLI's options are generated from them. How each (model,
build) is measured, and the start timeout, are the canary's and verify's own declarations.
A module of its own only to keep each module small.
"""

from dataclasses import field
from typing import Annotated

from .contract import Arg, Request, args_of
from .immutable import frozen
from .limits import TUNE_ATTEMPTS, TUNE_BUDGET_GB, TUNE_DEADLINE_DEFAULT_S, TUNE_DEADLINE_S
from .requests._shared import MAX_BUILDS, MAX_ID, MAX_MODELS, NO_GENERATE
from .requests.checks import CanaryRequest, VerifyRequest
from .swap import DEFAULT_LISTEN  # llama-swap's own port, on loopback

__all__ = [
    "DEFAULT_LISTEN",
    "SERVICE_ACTIONS",
    "BenchRequest",
    "BisectRequest",
    "RepairRequest",
    "ServiceRequest",
    "StatusRequest",
    "TuneRequest",
    "UpRequest",
]

SERVICE_ACTIONS = ("install", "start", "stop", "restart", "status", "uninstall")

MODELS = Arg("model ids", positional=True, metavar="MODEL", low=1, high=MAX_MODELS)
_VERIFY, _CANARY = dict(args_of(VerifyRequest)), dict(args_of(CanaryRequest))
START_TIMEOUT = _VERIFY["timeout"]
# how each (model, build) is measured: bench's, bisect's, the canary's (declared there)
REPEAT, PROMPT, TOKENS = _CANARY["repeat"], _CANARY["prompt_words"], _CANARY["tokens"]


def _canary_default(name: str) -> int:
    value = CanaryRequest.__dataclass_fields__[name].default
    assert isinstance(value, int), name
    return value


RUNS, WORDS, GENERATED = (_canary_default(n) for n in ("repeat", "prompt_words", "tokens"))


@frozen(kw_only=True)
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


@frozen(kw_only=True)
class RepairRequest(Request):
    """``verify --repair``: its models and timeout are verify's."""

    models: Annotated[list[str], _VERIFY["models"]] = field(default_factory=list)
    timeout: Annotated[float | None, _VERIFY["timeout"]] = None
    dry_run: Annotated[bool, Arg("with --repair: report, change nothing")] = False


@frozen(kw_only=True)
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


@frozen(kw_only=True)
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
        if self.good == self.bad:  # refused before anything is asked of the network
            return f"--good {self.good} must be an older release than --bad {self.bad}"
        return None


LISTEN = Arg("HOST:PORT llama-swap listens on (%(default)s)", metavar="ADDR", high=300)
PUBLIC = Arg(
    "allow an address beyond loopback (llama-swap has no authentication unless its config "
    "sets apiKeys)"
)


@frozen(kw_only=True)
class UpRequest(Request):
    listen: Annotated[str, LISTEN] = DEFAULT_LISTEN
    public: Annotated[bool, PUBLIC] = False
    replace: Annotated[
        bool,
        Arg("stop the llama-swap another up runs on this config first (else up refuses)"),
    ] = False


@frozen(kw_only=True)
class ServiceRequest(Request):
    action: Annotated[
        str, Arg("what to do with the service", positional=True, choices=SERVICE_ACTIONS)
    ]
    listen: Annotated[str, LISTEN] = DEFAULT_LISTEN
    public: Annotated[bool, PUBLIC] = False


@frozen(kw_only=True)
class StatusRequest(Request):
    """``status`` takes nothing: whether llama-swap runs, and what it serves."""
