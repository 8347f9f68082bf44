"""What several groups of requests share: bounds on lists and texts, and the options every
config change or measurement offers."""

from ..contract import Arg
from ..limits import VERIFY_TIMEOUT_S

__all__ = [
    "COMPONENT",
    "DRY_RUN",
    "LOCK",
    "LOCK_CLI",
    "MAX_BUILDS",
    "MAX_COMPONENTS",
    "MAX_ID",
    "MAX_MODELS",
    "MAX_PATH",
    "MODEL",
    "NO_GENERATE",
    "RUNS",
    "TIMEOUT",
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

# a model or row id's length and characters are the registry's rule (exit 2 as well), and a
# read (cmd, which) of an id too long to exist answers "not found"
MODEL = Arg("a model id from 'backendmgr models'", positional=True)

TIMEOUT = Arg(
    "seconds to become healthy, at most {high} (default: health_check_timeout)",
    metavar="S",
    bounds=VERIFY_TIMEOUT_S,
)


def _lock(*, api: bool = True) -> Arg:
    return Arg(
        "default: beside the config file",
        positional=True,
        metavar="LOCK",
        high=MAX_PATH,
        blank=False,
        api=api,
    )


LOCK = _lock()
LOCK_CLI = _lock(api=False)
"""``sync``'s lock: the command line's operand only (the API's is beside the config file)."""
