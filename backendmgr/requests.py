"""What each operation takes: one typed request per operation, every field declared once.

A request is a frozen standard-library dataclass (its base, :class:`Request`, and :class:`Arg`
are in :mod:`backendmgr.contract`). Each field carries, in its ``Annotated`` metadata, one
:class:`Arg`: its help text, how the command line gives it (an option, a
positional, its metavar) and its limits (:class:`~backendmgr.limits.Bounds`, lengths). From
that one declaration:

* the CLI's options are generated (:mod:`backendmgr.cli.options`), with the field's default;
* the request checks itself when made (``__post_init__``): each field's limits, then the
  request's cross-field :meth:`Request.rule`, raising a usage error (exit 2, HTTP 422) in the
  same words for the CLI, the API and a Python caller: ``limit: must be 1 or more, not 0``;
* the HTTP API validates JSON bodies into the same classes with pydantic
  (``__pydantic_config__`` refuses unknown keys; pydantic calls ``__post_init__``), and its
  OpenAPI schema shows each field's help and limits (:meth:`Arg.__get_pydantic_json_schema__`).

This module imports neither pydantic nor anything heavy: building a request from a command
line costs the standard library's ``dataclasses`` alone.
"""

import dataclasses
from dataclasses import dataclass, field
from typing import Annotated

from .contract import Arg, Request, args_of
from .limits import (
    BENCH_PROMPT,
    BENCH_REPEAT,
    BENCH_TOKENS,
    CANARY_TOLERANCE,
    PORT,
    PRUNE_KEEP,
    RELEASES_LIMIT,
    TOKEN_CHARS,
    VERIFY_TIMEOUT_S,
)

__all__ = [
    "MAX_BUILDS",
    "MAX_COMPONENTS",
    "MAX_MODELS",
    "ActivateRequest",
    "AddBackendRequest",
    "Arg",
    "CacheCleanRequest",
    "CanaryRequest",
    "CmdRequest",
    "DefaultRequest",
    "DoctorRequest",
    "FetchRequest",
    "GenerateRequest",
    "InstallRequest",
    "ListRequest",
    "LockRequest",
    "ModelsDirRequest",
    "PinRequest",
    "PruneRequest",
    "ReleasesQuery",
    "RemoveBackendRequest",
    "Request",
    "ServeRequest",
    "SetRequest",
    "SyncRequest",
    "UninstallRequest",
    "UnpinRequest",
    "UnsetRequest",
    "UpdateRequest",
    "VerifyRequest",
    "WhichRequest",
    "args_of",
]

MAX_BUILDS = 100
MAX_COMPONENTS = 100
MAX_MODELS = 1000
MAX_PATH = 4096
MAX_ID = 300


RUNS = "runs per model and build; the median and spread are over them (%(default)s)"
# the generate switch and dry run every config change shares
NO_GENERATE = Arg("do not regenerate the llama-swap config", flag="--no-generate")
DRY_RUN = Arg("check and say what would change (the config's diff), write nothing")
COMPONENT = Arg("a component id from 'backendmgr catalog'", positional=True, low=1, high=200)

# --- builds -----------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class ReleasesQuery(Request):
    component: Annotated[str, COMPONENT]
    variant: Annotated[str | None, Arg("only releases that ship this variant here", high=100)] = (
        None
    )
    refresh: Annotated[bool, Arg("skip the 10-minute cache window")] = False
    limit: Annotated[
        int,
        Arg(
            "at most N releases (at most {high}, default %(default)s)",
            metavar="N",
            bounds=RELEASES_LIMIT,
        ),
    ] = 10
    platform: Annotated[  # Python callers only: the installed marks are this host's
        str | None, Arg("list for another host's OS and CPU", high=100, cli=False)
    ] = None


@dataclass(frozen=True, kw_only=True)
class InstallRequest(Request):
    """``dry_run`` and ``platform`` plan without installing (``platform`` needs ``dry_run``)."""

    component: Annotated[str, COMPONENT]
    version: Annotated[
        str | None,
        Arg("a release tag or version (default: the latest)", positional=True),
    ] = None  # its length and characters: ``tag_problem``, as a listing's (in ``rule``)
    variant: Annotated[
        str | None, Arg("cpu, vulkan, cuda, rocm, … (default: suggested for here)", high=100)
    ] = None
    activate: Annotated[bool, Arg("activate it even if another is")] = False
    reinstall: Annotated[bool, Arg("install again even if installed")] = False
    require_checksum: Annotated[bool, Arg("refuse assets without a published digest")] = False
    smoke: Annotated[bool, Arg("skip running it with --version", flag="--no-smoke")] = True
    refresh: Annotated[bool, Arg("skip the release-list cache window")] = False
    dry_run: Annotated[bool, Arg("print the plan, download nothing")] = False
    platform: Annotated[
        str | None, Arg("with --dry-run: plan for another host", metavar="OS-ARCH", high=100)
    ] = None
    generate: Annotated[bool, NO_GENERATE] = True

    def rule(self) -> str | None:
        if self.platform is not None and not self.dry_run:
            return "--platform describes another machine; use it with --dry-run"
        if self.version is not None:
            # a version no release may carry (a newline, a bidi override) is refused before
            # anything starts, with the reason the release listing gives
            from .sources.models import tag_problem

            problem = tag_problem(self.version)
            if problem is not None:
                return f"version: {problem[:1].lower()}{problem[1:]}"
        return None


@dataclass(frozen=True, kw_only=True)
class ListRequest(Request):
    component: Annotated[
        str | None, Arg("only builds of this component", positional=True, high=200)
    ] = None


@dataclass(frozen=True, kw_only=True)
class UninstallRequest(Request):
    builds: Annotated[
        list[str],
        Arg("COMPONENT@VERSION-VARIANT", positional=True, metavar="BUILD", low=1, high=MAX_BUILDS),
    ]
    force: Annotated[
        bool, Arg("even if models are pinned to it, or it is its component's only build")
    ] = False
    generate: Annotated[bool, NO_GENERATE] = True
    dry_run: Annotated[bool, DRY_RUN] = False  # every check, the plan and the diff; no removal


@dataclass(frozen=True, kw_only=True)
class ActivateRequest(Request):
    build: Annotated[str, Arg("COMPONENT@VERSION-VARIANT", positional=True, low=1, high=MAX_ID)]
    generate: Annotated[bool, NO_GENERATE] = True
    dry_run: Annotated[bool, DRY_RUN] = False
    force: Annotated[
        bool, Arg("activate even when a model's extra_args uses a flag the build does not list")
    ] = False


@dataclass(frozen=True, kw_only=True)
class UpdateRequest(Request):
    components: Annotated[
        list[str],
        Arg("default: every one", positional=True, metavar="COMPONENT", high=MAX_COMPONENTS),
    ] = field(default_factory=list)
    dry_run: Annotated[bool, Arg("say what would change, change nothing")] = False
    generate: Annotated[bool, NO_GENERATE] = True
    force: Annotated[
        bool,
        Arg("activate even when a model's extra_args uses a flag the new build does not list"),
    ] = False


@dataclass(frozen=True, kw_only=True)
class PruneRequest(Request):
    component: Annotated[str | None, Arg("default: every component", positional=True, high=200)] = (
        None
    )
    keep: Annotated[
        int,
        Arg(
            "keep the N newest builds (%(default)s; at most {high})",
            metavar="N",
            bounds=PRUNE_KEEP,
        ),
    ] = 1
    dry_run: Annotated[bool, Arg("list what would go, remove nothing")] = False
    generate: Annotated[bool, NO_GENERATE] = True


@dataclass(frozen=True, kw_only=True)
class CacheCleanRequest(Request):
    dry_run: Annotated[bool, Arg("report, remove nothing")] = False


@dataclass(frozen=True, kw_only=True)
class DoctorRequest(Request):
    fix: Annotated[bool, Arg("repair what can be repaired")] = False


# --- registry and overrides ------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class AddBackendRequest(Request):
    """``id`` is checked by the registry's own rule (a malformed id, exit 2), not a length."""

    id: Annotated[str, Arg("a new row id (no '@', not a catalog component id)", positional=True)]
    kind: Annotated[str, Arg("llama, vllm, sd, tts, asr, audiocpp, …, or custom", high=100)]
    path: Annotated[str, Arg("the executable", high=MAX_PATH)]
    name: Annotated[str, Arg("a display name", high=200)] = ""
    force: Annotated[bool, Arg("accept a path that is missing or not executable")] = False
    default: Annotated[bool, Arg("make it the ★ of its classes")] = False
    generate: Annotated[bool, NO_GENERATE] = True


@dataclass(frozen=True, kw_only=True)
class RemoveBackendRequest(Request):
    id: Annotated[str, Arg("a manual row id from 'backendmgr backends'", positional=True)]
    generate: Annotated[bool, NO_GENERATE] = True


@dataclass(frozen=True, kw_only=True)
class DefaultRequest(Request):
    row: Annotated[str, Arg("a row id from 'backendmgr backends'", positional=True)]
    generate: Annotated[bool, NO_GENERATE] = True


# a model or row id's length and characters are the registry's rule (exit 2 as well), and a
# read (cmd, which) of an id too long to exist answers "not found"
MODEL = Arg("a model id from 'backendmgr models'", positional=True)


@dataclass(frozen=True, kw_only=True)
class PinRequest(Request):
    model: Annotated[str, MODEL]
    row: Annotated[
        str,
        Arg(
            "a row id from 'backendmgr backends', e.g. llama-server@b10800-rocm",
            positional=True,
        ),
    ]
    generate: Annotated[bool, NO_GENERATE] = True
    dry_run: Annotated[bool, DRY_RUN] = False
    force: Annotated[
        bool, Arg("pin even when the model's extra_args uses a flag the build does not list")
    ] = False


@dataclass(frozen=True, kw_only=True)
class UnpinRequest(Request):
    model: Annotated[str, Arg("a model id", positional=True)]
    generate: Annotated[bool, NO_GENERATE] = True
    dry_run: Annotated[bool, DRY_RUN] = False


@dataclass(frozen=True, kw_only=True)
class SetRequest(Request):
    model: Annotated[
        str,
        Arg("a model id from 'backendmgr models' (or one not found yet)", positional=True),
    ]
    values: Annotated[
        dict[str, str],
        Arg("one or more settings; see keys", positional=True, metavar="KEY=VALUE", low=1, high=20),
    ]
    generate: Annotated[bool, NO_GENERATE] = True
    dry_run: Annotated[bool, DRY_RUN] = False


@dataclass(frozen=True, kw_only=True)
class UnsetRequest(Request):
    model: Annotated[str, Arg("a model id", positional=True)]
    keys: Annotated[
        list[str],
        Arg("one or more keys; see keys", positional=True, metavar="KEY", low=1, high=20),
    ]
    generate: Annotated[bool, NO_GENERATE] = True
    dry_run: Annotated[bool, DRY_RUN] = False


# --- models, the generated config, lock files --------------------------------------------


@dataclass(frozen=True, kw_only=True)
class ModelsDirRequest(Request):
    """``models add-dir`` (``add``) and ``models remove-dir``: the subcommand sets ``add``."""

    path: Annotated[
        str, Arg("the folder (~ is expanded)", positional=True, metavar="PATH", high=MAX_PATH)
    ]
    add: Annotated[bool, Arg("add the folder (else remove it)")]
    generate: Annotated[bool, NO_GENERATE] = True
    dry_run: Annotated[bool, DRY_RUN] = False


@dataclass(frozen=True, kw_only=True)
class CmdRequest(Request):
    model: Annotated[str, MODEL]


@dataclass(frozen=True, kw_only=True)
class GenerateRequest(Request):
    """``output`` is the CLI's ``--output`` only: the API writes only the configured file."""

    output: Annotated[
        str | None,
        Arg(
            "write here instead of the configured output",
            metavar="PATH",
            high=MAX_PATH,
            blank=False,
            api=False,
        ),
    ] = None
    force: Annotated[bool, Arg("rewrite even when up to date")] = False
    check: Annotated[bool, Arg("exit 1 when missing or stale")] = False


TIMEOUT = Arg(
    "seconds to become healthy, at most {high} (default: health_check_timeout)",
    metavar="S",
    bounds=VERIFY_TIMEOUT_S,
)


@dataclass(frozen=True, kw_only=True)
class VerifyRequest(Request):
    models: Annotated[
        list[str],
        Arg("model ids (default: all)", positional=True, metavar="MODEL", high=MAX_MODELS),
    ] = field(default_factory=list)
    timeout: Annotated[float | None, TIMEOUT] = None
    keep_going: Annotated[bool, Arg("check the others after a failure")] = False


LOCK = Arg(
    "default: beside the config file",
    positional=True,
    metavar="LOCK",
    high=MAX_PATH,
    blank=False,
)


@dataclass(frozen=True, kw_only=True)
class SyncRequest(Request):
    """``lock`` is the CLI's LOCK argument only (default, and the API's: beside the config
    file)."""

    lock: Annotated[str | None, dataclasses.replace(LOCK, api=False)] = None
    locked: Annotated[
        bool,
        Arg("fail, changing nothing, if the lock is out of date for the builds installed here"),
    ] = False
    prune: Annotated[bool, Arg("remove builds the lock does not list")] = False
    force: Annotated[bool, Arg("with --prune: remove pinned builds too")] = False
    dry_run: Annotated[bool, Arg("say what would change, change nothing")] = False

    def rule(self) -> str | None:
        return "--force only applies with --prune" if self.force and not self.prune else None


@dataclass(frozen=True, kw_only=True)
class LockRequest(Request):
    output: Annotated[
        str | None,
        Arg(
            "where to write it (default: beside the config file)",
            metavar="PATH",
            high=MAX_PATH,
            blank=False,
        ),
    ] = None
    fetch: Annotated[
        str | None,
        Arg(
            "also download every locked asset into DIR, laid out for scripts/mirror.py",
            metavar="DIR",
            high=MAX_PATH,
            blank=False,
        ),
    ] = None


@dataclass(frozen=True, kw_only=True)
class FetchRequest(Request):
    dir: Annotated[
        str,
        Arg(
            "where to lay out <owner>/<repo>/<tag>/<asset>",
            positional=True,
            metavar="DIR",
            high=MAX_PATH,
            blank=False,
        ),
    ]
    lock: Annotated[str | None, LOCK] = None


@dataclass(frozen=True, kw_only=True)
class WhichRequest(Request):
    target: Annotated[
        str,
        Arg(
            "a model, component or build",
            positional=True,
            metavar="MODEL|COMPONENT|BUILD",
        ),
    ]


@dataclass(frozen=True, kw_only=True)
class ServeRequest(Request):
    """``serve``: where the page and the API listen (beyond loopback only with a token: the
    web server's own rule, :mod:`backendmgr.web.security`)."""

    host: Annotated[str, Arg("address to listen on (%(default)s)", high=300)] = "127.0.0.1"
    port: Annotated[
        int, Arg("port (%(default)s; 0 picks a free one)", metavar="PORT", bounds=PORT)
    ] = 8577
    open: Annotated[bool, Arg("open the page in a browser")] = False
    token: Annotated[
        str | None,
        Arg(
            "use this secret (16+ characters of A-Z a-z 0-9 . _ ~ -) instead of the data "
            "home's; needed to listen beyond loopback. BACKENDMGR_TOKEN is safer: a command "
            "line is visible to other users",
            high=TOKEN_CHARS[1],  # its characters and shortest length: web.security's rule
        ),
    ] = None


@dataclass(frozen=True, kw_only=True)
class CanaryRequest(Request):
    """``activate BUILD --canary MODEL…``: the build to try, its canary models, how much
    slower it may be (percent), and how each (model, build) is measured (bench's options)."""

    build: Annotated[str, Arg("COMPONENT@VERSION-VARIANT", positional=True, low=1, high=MAX_ID)]
    models: Annotated[
        list[str],
        Arg(
            "move only these models first, verify and bench them on both builds, then promote "
            "(activate) or roll back",
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
    repeat: Annotated[int, Arg(RUNS, metavar="N", bounds=BENCH_REPEAT)] = 3
    prompt_words: Annotated[
        int,
        Arg(
            "words of the fixed prompt, about a token each (%(default)s)",
            flag="--prompt",
            metavar="WORDS",
            bounds=BENCH_PROMPT,
        ),
    ] = 256
    tokens: Annotated[
        int, Arg("tokens generated per run (%(default)s)", metavar="N", bounds=BENCH_TOKENS)
    ] = 64
    timeout: Annotated[float | None, TIMEOUT] = None

    def rule(self) -> str | None:
        for model in self.models:
            if not 1 <= len(model) <= 500:
                return "models: each model id must have 1 to 500 characters"
        return None
