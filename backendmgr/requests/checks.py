"""What starts a model to check it: ``verify`` and ``activate --canary``."""

from dataclasses import field
from typing import Annotated

from ..contract import Arg, Request
from ..immutable import frozen
from ..limits import BENCH_PROMPT, BENCH_REPEAT, BENCH_TOKENS, CANARY_TOLERANCE
from ._shared import MAX_ID, MAX_MODELS, RUNS, TIMEOUT

__all__ = ["CanaryRequest", "VerifyRequest"]


@frozen(kw_only=True, repr=True, eq=True)
class VerifyRequest(Request):
    models: Annotated[
        list[str],
        Arg("model ids (default: all)", positional=True, metavar="MODEL", high=MAX_MODELS),
    ] = field(default_factory=list)
    timeout: Annotated[float | None, TIMEOUT] = None
    keep_going: Annotated[bool, Arg("check the others after a failure")] = False


@frozen(kw_only=True, repr=True, eq=True)
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
