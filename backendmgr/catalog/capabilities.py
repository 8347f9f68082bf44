"""What one build can do, read from its own ``--help``, ``--version`` and ``--list-devices``
output (SPEC §19). Pure: text in, a :class:`Capabilities` out; running the program is
:mod:`backendmgr.install.probe`'s job.

A build whose help lists no option at all is *unknown*, not "can do nothing": emitters then
behave as they did before capabilities existed, so a stand-in or a strange build never loses
flags because of a parse that found nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import field

from ..immutable import frozen
from ..record import Record

__all__ = [
    "GPU_BACKENDS",
    "Capabilities",
    "CapabilityIndex",
    "has_gpu",
    "kind_family",
    "missing_gpu",
    "parse_backends",
    "parse_capabilities",
    "parse_options",
    "parse_version",
    "promised_backend",
    "unlisted_flags",
]

MAX_OPTIONS = 4096
"""A real llama-server lists a few hundred; more than this is not a help text."""
MAX_OPTION_LEN = 64
MAX_LINE = 4096
"""Longer lines are not option lines; they are skipped rather than scanned."""

# Patterns as text: ``re`` compiles each on first use and keeps it, so a read that parses no
# help text (``which``, ``models``: the capabilities come cached) compiles none of them.
_OPTION = r"--?[A-Za-z0-9][A-Za-z0-9_.-]*"
_VERSION = r"\bversion:?\s+(\d+)\s+\(([0-9a-fA-F]{4,40})\)"
_BACKEND_LINES = (  # matched ignoring case
    r"^\s*(CUDA|Vulkan|ROCm|HIP|Metal|MTL|SYCL|OpenCL|CANN|MUSA)\d*\s*:",  # a device line
    r"\bloaded\s+([A-Za-z]+)\s+backend\b",
    r"\bfound\s+\d+\s+(CUDA|Vulkan|ROCm|HIP|SYCL|Metal|MUSA)\s+devices?\b",
)

_CANONICAL = {
    "cuda": "CUDA",
    "vulkan": "Vulkan",
    "rocm": "ROCm",
    "hip": "ROCm",
    "metal": "Metal",
    "mtl": "Metal",
    "sycl": "SYCL",
    "opencl": "OpenCL",
    "cann": "CANN",
    "musa": "MUSA",
    "cpu": "CPU",
    "blas": "BLAS",
    "rpc": "RPC",
}
GPU_BACKENDS = frozenset({"CUDA", "Vulkan", "ROCm", "Metal", "SYCL", "OpenCL", "CANN", "MUSA"})
_PROMISES = {"cuda": "CUDA", "vulkan": "Vulkan", "rocm": "ROCm", "hip": "ROCm", "metal": "Metal"}
_PROMISES |= {"sycl": "SYCL", "musa": "MUSA", "cann": "CANN", "opencl": "OpenCL"}


@frozen(kw_only=True)
class Capabilities(Record):
    """What the probe found. ``None`` in a field means "could not tell", never "none"."""

    options: list[str] | None = None
    version: str | None = None
    build: int | None = None
    commit: str | None = None
    backends: list[str] | None = None
    error: str | None = None

    @property
    def known(self) -> bool:
        return self.options is not None

    def lists(self, flag: str) -> bool:
        """True when the build lists ``flag``; also True when its options are unknown."""
        return self.options is None or flag in self.options

    def first_listed(self, flags: Iterable[str]) -> str | None:
        """The first of several spellings (``--embedding``, ``--embeddings``) the build lists;
        with unknown options, the first one (emit as before)."""
        names = list(flags)
        if self.options is None:
            return names[0] if names else None
        return next((f for f in names if f in self.options), None)


def _lines(text: str) -> Iterable[str]:
    for line in text.splitlines():
        if len(line) <= MAX_LINE:
            yield line.expandtabs(8)


def parse_options(text: str) -> list[str]:
    """Every option a help text lists in its first column, long and short forms, sorted.

    Handles llama.cpp's ``-fa,   --flash-attn [on|off|auto]   description`` and argparse's
    ``  -h, --help   show this help``: the option column ends at the first run of two spaces
    (a comma followed by padding continues it), its comma-separated parts each start with the
    option, and a metavar or ``=VALUE`` after it is dropped. Descriptions are never read, so
    an option only mentioned in prose is not listed.
    """
    found: set[str] = set()
    for line in _lines(text):
        body = line.lstrip()
        if not body.startswith("-"):
            continue
        chunks = re.split(r"\s{2,}", body)
        column = chunks[0]
        for chunk in chunks[1:]:  # llama.cpp pads after a comma: "-h,    --help, --usage"
            if not column.rstrip().endswith(","):
                break
            column += " " + chunk
        for part in column.split(","):
            token = part.strip().split(" ", 1)[0].split("=", 1)[0].split("[", 1)[0]
            if len(token) <= MAX_OPTION_LEN and re.fullmatch(_OPTION, token):
                found.add(token)
        if len(found) >= MAX_OPTIONS:
            break
    return sorted(found)


UNLISTED_SHOWN = 10  # flags named at most: a message per flag of a 20 000-flag value is noise


def unlisted_flags(extra_args: str | None, caps: Capabilities | None) -> list[str]:
    """The flags of ``extra_args`` (``--x`` and ``--x=v`` alike) that ``caps`` does not list:
    what a switch to that build would break. None when its options are unknown (a stand-in, a
    build probed before capabilities), or ``extra_args`` does not split. At most
    UNLISTED_SHOWN of them, each cut at MAX_OPTION_LEN: they are named in messages."""
    import shlex

    if caps is None or caps.options is None or not extra_args:
        return []
    try:
        tokens = shlex.split(extra_args)
    except ValueError:
        return []
    out = []
    for token in tokens:
        flag = token.split("=", 1)[0]
        is_flag = re.fullmatch(_OPTION, flag) and not flag.lstrip("-")[:1].isdigit()  # not -1
        if len(flag) > MAX_OPTION_LEN:
            flag = flag[:MAX_OPTION_LEN] + "…"
        if is_flag and flag not in caps.options and flag not in out:
            out.append(flag)
            if len(out) == UNLISTED_SHOWN:
                break
    return out


def parse_version(text: str) -> tuple[str | None, int | None, str | None]:
    """The version line, build number and commit (``version: 11211 (4f3a2b1)``)."""
    for line in _lines(text):
        match = re.search(_VERSION, line)
        if match:
            return line.strip()[:200], int(match.group(1)[:12]), match.group(2).lower()
    first = next((ln.strip() for ln in _lines(text) if ln.strip()), None)
    return (first[:200] if first else None), None, None


def parse_backends(texts: Iterable[str], *, devices_listed: bool) -> list[str] | None:
    """Compute backends named by device lines (``CUDA0: NVIDIA …``), ``loaded X backend`` and
    ``found N CUDA devices`` lines. A device list that ran and names no GPU means CPU only;
    with no list and nothing named, the answer is unknown."""
    found: set[str] = set()
    for text in texts:
        for line in _lines(text):
            for pattern in _BACKEND_LINES:
                match = re.search(pattern, line, re.IGNORECASE)
                name = _CANONICAL.get(match.group(1).lower()) if match else None
                if name:
                    found.add(name)
    if devices_listed:
        found.add("CPU")
    return sorted(found) if found else None


def parse_capabilities(
    help_text: str | None,
    version_text: str | None,
    devices_text: str | None = None,
    *,
    error: str | None = None,
) -> Capabilities:
    """One build's capabilities from what its runs printed (``None``: that run failed)."""
    options = parse_options(help_text) if help_text else []
    version, build, commit = parse_version(version_text or "")
    backends = parse_backends(
        [t for t in (version_text, help_text, devices_text) if t],
        devices_listed=devices_text is not None,
    )
    if not options and error is None:
        error = "its --help listed no options"
    return Capabilities(
        options=options or None,
        version=version,
        build=build,
        commit=commit,
        backends=backends,
        error=error,
    )


def promised_backend(variant: str) -> str | None:
    """The GPU backend a variant name promises (``cuda``, ``cuda-12.8`` → CUDA), if any."""
    head = re.split(r"[-_.\d]", variant.strip().lower(), maxsplit=1)[0]
    return _PROMISES.get(head)


def has_gpu(caps: Capabilities) -> bool | None:
    if caps.backends is None:
        return None
    return bool(GPU_BACKENDS & set(caps.backends))


def missing_gpu(build_id: str, variant: str, caps: Capabilities | None) -> str | None:
    """The warning for a build whose probe shows no GPU backend while its variant promises
    one (a cuda build that finds no driver library runs on the CPU, slowly)."""
    promised = promised_backend(variant)
    if caps is None or promised is None or has_gpu(caps) is not False:
        return None
    shown = ", ".join(caps.backends or []) or "none"
    return (
        f"{build_id} is a {variant} build but reports no GPU backend (only {shown}); models "
        f"on it would run on the CPU; check the {promised} driver and its libraries"
    )


@frozen
class CapabilityIndex:
    """Capabilities by executable path, and which registry rows are installed builds, so that
    an emitter can say which build *does* have a flag (pure data handed to the planner)."""

    by_path: Mapping[str, Capabilities] = field(default_factory=dict)
    builds: tuple[tuple[str, str, Capabilities], ...] = ()
    """(row id, kind, capabilities) of every installed build row, newest first."""

    def of(self, path: str | None) -> Capabilities | None:
        return self.by_path.get(path) if path else None

    def builds_listing(self, kind: str, flags: Iterable[str]) -> list[str]:
        """Build rows of ``kind``'s family whose known options include one of ``flags``."""
        wanted, family = list(flags), kind_family(kind)
        return [
            row_id
            for row_id, row_kind, caps in self.builds
            if kind_family(row_kind) == family
            and caps.known
            and any(f in (caps.options or ()) for f in wanted)
        ]


LLAMA_KINDS = frozenset({"llama", "llama.cpp", "server"})


def kind_family(kind: str) -> str:
    """``llama``, ``llama.cpp`` and ``server`` rows all run llama-server; other kinds as is."""
    kind = kind.strip().lower()
    return "llama" if kind in LLAMA_KINDS else kind
