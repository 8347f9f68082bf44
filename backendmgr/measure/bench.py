"""``bench``: prompt and generation speed per (model, build, device), and how it is asked for.

The prompt is fixed (the same words for every build, so that two builds' figures compare), of
a stated number of words, with the prompt cache off so that every run processes it again; the
server generates a stated number of tokens (end-of-sequence ignored). llama-server reports its
own ``timings`` (``prompt_per_second``, ``predicted_per_second``); vLLM reports the tokens in
``usage``, timed here by the wall clock (no prompt figure: its share of the time is unknown).
Figures are kept like ``tune``'s: one record per (model, build, device) in the data home.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import field
from typing import TYPE_CHECKING, Any

from ..immutable import frozen
from ..record import Record
from .store import BENCH_NAME, BenchStore
from .tuned import Place, device_of, load_kept, model_fingerprint

if TYPE_CHECKING:
    import httpx

    from ..discovery.models import DiscoveredModel

__all__ = [
    "BENCH_NAME",
    "BenchRecord",
    "BenchStore",
    "Run",
    "figures",
    "matching",
    "prompt_text",
    "run_line",
    "run_once",
    "shown_figures",
    "spread_pct",
]

REQUEST_TIMEOUT_S = 900.0  # one run, in all: a slow CPU generating a few hundred tokens fits
ANSWER_CAP = 1 << 20  # bytes of an answer read

# Common English words, about one token each in every vocabulary backendmgr meets.
_SENTENCE = (
    "the quick brown fox jumps over a lazy dog while seven small birds sing in the old garden "
    "near river bank and children read books about distant mountains under bright summer sky"
)
_WORDS = _SENTENCE.split()


def prompt_text(words: int) -> str:
    """The fixed prompt of ``words`` words: the same text for every model and build."""
    return " ".join(_WORDS[i % len(_WORDS)] for i in range(words))


@frozen
class Run:
    """One request's figures: tokens per second (``prompt`` None where unknown) and counts."""

    prompt_per_second: float | None
    predicted_per_second: float
    prompt_tokens: int | None
    predicted_tokens: int


@frozen(kw_only=True)
class BenchRecord(Record):
    """The figures of the last ``bench`` of one model on one build and device."""

    model: str
    build: str  # the row (build id) it ran on
    device: str
    prompt_per_second: float | None  # medians of the runs
    predicted_per_second: float
    prompt_spread: float | None = None  # (max - min) / median, in percent
    predicted_spread: float = 0.0
    runs: int
    prompt_words: int
    prompt_tokens: int | None = None
    predicted_tokens: int
    measured_by: str  # "llama-server timings" or "usage and wall clock"
    argv: list[str] = field(default_factory=list)
    model_fp: str
    build_fp: str
    benched_at: str


def matching(
    records: dict[str, list[dict[str, Any]]], model: str, model_fp: str, device: str
) -> list[BenchRecord]:
    """The model's records for its file as it is now and this device, one per build."""
    out = []
    for raw in records.get(model, []):
        record = load_kept(BenchRecord, raw, BENCH_NAME)
        if record is not None and (record.model_fp, record.device) == (model_fp, device):
            out.append(record)
    return out


SHOWN = (
    "build",
    "prompt_per_second",
    "predicted_per_second",
    "prompt_spread",
    "predicted_spread",
    "runs",
    "benched_at",
)


def shown_figures(
    place: Place, records: dict[str, list[dict[str, Any]]], model: DiscoveredModel
) -> list[dict[str, Any]]:
    """What ``models`` shows of a model's figures: the last of each build, on this device."""
    if not records.get(model.id):  # never benched: no file to stat, no device to probe
        return []
    found = matching(records, model.id, model_fingerprint(model), device_of(place))
    return [{k: getattr(r, k) for k in SHOWN} for r in found]


def spread_pct(values: list[float]) -> float:
    """(max - min) / median in percent: how far apart the runs were."""
    from statistics import median  # a bench run's, not a read's (``models`` shows figures)

    middle = median(values)
    return round((max(values) - min(values)) / middle * 100, 1) if middle > 0 else 0.0


def figures(runs: list[Run]) -> dict[str, Any]:
    """Medians and spreads of ``runs`` (at least one), as :class:`BenchRecord` fields."""
    from statistics import median

    gen = [r.predicted_per_second for r in runs]
    pp = [r.prompt_per_second for r in runs if r.prompt_per_second is not None]
    return {
        "prompt_per_second": round(median(pp), 2) if pp else None,
        "predicted_per_second": round(median(gen), 2),
        "prompt_spread": spread_pct(pp) if pp else None,
        "predicted_spread": spread_pct(gen),
        "runs": len(runs),
        "prompt_tokens": runs[-1].prompt_tokens,
        "predicted_tokens": runs[-1].predicted_tokens,
    }


def _number(data: Any, key: str) -> float | None:
    """``data[key]`` when it is a finite number of at least 0: a server's NaN, Infinity (JSON
    as Python reads it), string or negative figure is no figure (a NaN median would compare
    as "no slower" and promote a canary)."""
    value = data.get(key) if isinstance(data, dict) else None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) and number >= 0 else None


async def run_once(
    client: httpx.AsyncClient, kind: str, model_id: str, words: int, tokens: int
) -> Run | str:
    """One request of the fixed prompt for ``tokens`` tokens; its figures, or why none."""
    import httpx

    from ..serve_check import Unusable, bounded_answer

    prompt = prompt_text(words)
    vllm = kind == "vllm"
    if vllm:
        path = "/v1/completions"
        body: dict[str, Any] = {"model": model_id, "prompt": prompt, "max_tokens": tokens}
    else:
        path = "/completion"
        body = {"prompt": prompt, "n_predict": tokens, "cache_prompt": False}
    body.update(ignore_eos=True, temperature=0)
    started = time.monotonic()
    try:
        status, raw = await bounded_answer(
            client, "POST", path, within=REQUEST_TIMEOUT_S, json=body, cap=ANSWER_CAP
        )
        wall = time.monotonic() - started
    except Unusable as exc:
        return str(exc)
    except httpx.HTTPError as exc:
        return f"{path}: {type(exc).__name__} {exc}".strip()
    try:
        data = json.loads(raw) if status < 400 else None
    except (ValueError, RecursionError):  # not JSON, or nested deeper than Python parses
        data = None
    if not isinstance(data, dict):
        return f"HTTP {status} from {path}: no figures in the answer"
    if vllm:
        done = _number(data.get("usage"), "completion_tokens")
        given = _number(data.get("usage"), "prompt_tokens")
        if not done or wall <= 0:
            return f"{path} answered without usage.completion_tokens"
        return Run(None, done / wall, int(given) if given else None, int(done))
    timings = data.get("timings")
    gen = _number(timings, "predicted_per_second")
    if gen is None:
        return f"{path} answered without timings.predicted_per_second"
    pp = _number(timings, "prompt_per_second")
    given, done = _number(timings, "prompt_n"), _number(timings, "predicted_n")
    return Run(pp, gen, int(given) if given is not None else None, int(done or 0))


def run_line(model: str, build: str, n: int, repeat: int, run: Run) -> str:
    """One bench run of a canary as its progress says it (the terminal's and the page's)."""
    return f"{model} on {build}: run {n}/{repeat}: {run.predicted_per_second:.1f} t/s"
