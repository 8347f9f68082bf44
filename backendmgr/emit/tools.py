"""vLLM tool-call parsers by model family (SPEC §12.4).

Only families whose parser vLLM's tool-calling documentation names are listed: a wrong parser
does not fail, it silently leaves tool calls as plain text, which is worse than the HTTP 400
vLLM gives without one. The table is keyed by the top-level HF ``model_type`` and the GGUF
``general.architecture``; where one architecture covers several formats (a point release that
shares its base's ``model_type``, Mistral GGUFs converted as ``llama``), the model id decides.

The documentation pairs some parsers with a ``--chat-template`` from vLLM's source tree
(``examples/…``); that flag is optional for auto tool choice and the file is not part of an
installed build, so none is emitted: the model's own template is used. ``--enable-auto-tool-choice``
is mandatory and always goes with the parser.

Each vLLM build registers its own parsers (recorded in its receipt at install): a parser the
resolved build lacks is not emitted, and the note says which one and which vLLM has it.
"""

from __future__ import annotations

import re
from collections.abc import Collection

__all__ = [
    "KNOWN_PARSERS",
    "KNOWN_VERSION",
    "against_build",
    "is_override_warning",
    "tool_parser",
]

_QWEN_HERMES = ("qwen2", "qwen2_moe", "qwen2moe", "qwen3", "qwen3_moe", "qwen3moe")
_TABLE: dict[str, str] = {
    **dict.fromkeys(_QWEN_HERMES, "hermes"),
    # Qwen3-Next: the Qwen section (hermes), with the coder switch below.
    "qwen3_next": "hermes",
    "qwen3next": "hermes",
    "qwen3_5": "qwen3_coder",
    "qwen35": "qwen3_coder",
    "qwen3_5_moe": "qwen3_coder",
    "qwen35moe": "qwen3_coder",
    "llama": "llama3_json",
    # Llama 4: the docs recommend llama4_pythonic *with* vLLM's own pythonic template; the
    # model's own template writes JSON tool calls, which llama4_json parses.
    "llama4": "llama4_json",
    "gpt_oss": "openai",
    "gpt-oss": "openai",
    "mistral": "mistral",
    "mixtral": "mistral",
    "mistral3": "mistral",
    "deepseek_v3": "deepseek_v3",
    "deepseek2": "deepseek_v3",  # gguf: V2, V3, R1 and Kimi K2 alike; the id decides below
    "kimi_k2": "kimi_k2",
    "glm4_moe": "glm45",
    "glm4moe": "glm45",
    "glm4_moe_lite": "glm47",  # GLM-4.7-Flash
    "gemma4": "gemma4",
    "granite": "granite",
    "granitemoe": "granite",
    "granitemoehybrid": "granite4",
    "granitehybrid": "granite4",
    "phi3": "phi4_mini_json",  # Phi-3 and Phi-4 share it; only Phi-4-mini, by id below
    "minimax_m2": "minimax_m2",
    "minimax-m2": "minimax_m2",
    "olmo3": "olmo3",
    "jamba": "jamba",
}
_QWEN3 = frozenset({"qwen3", "qwen3_moe", "qwen3moe", "qwen3_next", "qwen3next"})
_HERMES_OK = frozenset({*_QWEN_HERMES, "llama", "mistral", "mixtral"})

# Patterns as text: ``re`` compiles each on first use and keeps it (most plans ask none)
_HERMES_ID = r"hermes"
_MISTRAL_ID = r"mistral|mixtral|ministral|devstral|magistral|codestral"
_DEEPSEEK_V31_ID = r"v3[._-]?1(?!\d)|terminus"
_DEEPSEEK_V3_ID = r"(?<![a-z0-9])(v3|r1)(?![0-9])"
_GLM47_ID = r"4[._-]7(?!\d)"
_GRANITE4_ID = r"granite[._-]?4(?!\d)"
_PHI4_MINI_ID = r"phi[._-]?4[._-]?mini"

KNOWN_VERSION = "0.33.0"
"""A vLLM whose registered parsers are known (listed below): named when a build lacks one."""
KNOWN_PARSERS = frozenset(
    [
        "apertus",
        "beam",
        "cohere_command3",
        "cohere_command4",
        "deepseek_v3",
        "deepseek_v31",
        "deepseek_v32",
        "deepseek_v4",
        "deepseek_v41",
        "dots",
        "ernie45",
        "functiongemma",
        "gemma4",
        "gigachat3",
        "glm45",
        "glm47",
        "granite",
        "granite-20b-fc",
        "granite4",
        "hermes",
        "hf",
        "hunyuan_a13b",
        "hy_v3",
        "hy_v4",
        "inkling",
        "internlm",
        "jamba",
        "k2_horizon",
        "kimi_k2",
        "kimi_k3",
        "lfm2",
        "ling3",
        "llama3_json",
        "llama4_json",
        "llama4_pythonic",
        "longcat",
        "mimo",
        "minicpm5",
        "minimax_m2",
        "minimax_m3",
        "mistral",
        "muse",
        "muse_glimmer",
        "musespark1x",
        "olmo3",
        "openai",
        "phi4_mini_json",
        "plamo3",
        "poolside_v1",
        "pythonic",
        "qwen3_coder",
        "qwen3_json",
        "qwen3_xml",
        "seed_oss",
        "step3",
        "step3p5",
        "step5",
        "xlam",
    ]
)

_OVERRIDE_WARNING = "vllm_tool_parser "


def _by_id(arch: str, parser: str, model_id: str) -> str | None:
    """The model-id rules for architectures that several formats share."""
    mid = model_id.lower()
    if arch in _HERMES_OK and re.search(_HERMES_ID, mid):
        return "hermes"  # Nous Hermes fine-tunes keep the hermes format whatever the base
    if arch in _QWEN3 and "coder" in mid:
        return "qwen3_coder"
    if arch == "llama" and re.search(_MISTRAL_ID, mid):
        return "mistral"  # Mistral and Mixtral GGUFs are converted as llama
    if arch in ("deepseek_v3", "deepseek2"):
        if "kimi" in mid:
            return "kimi_k2"
        if re.search(_DEEPSEEK_V31_ID, mid):
            return "deepseek_v31"  # V3.1 and V3.1-Terminus keep the deepseek_v3 model_type
        if arch == "deepseek2" and not re.search(_DEEPSEEK_V3_ID, mid):
            return None  # DeepSeek-V2 and V2.5: no documented parser
    if arch in ("glm4_moe", "glm4moe") and re.search(_GLM47_ID, mid):
        return "glm47"  # GLM-4.7 keeps GLM-4.5's model_type
    if arch in ("granite", "granitemoe") and re.search(_GRANITE4_ID, mid):
        return "granite4"  # Granite 4.0 dense models keep the granite model_type
    if arch == "phi3" and not re.search(_PHI4_MINI_ID, mid):
        return None
    return parser


def tool_parser(architecture: str, model_id: str, override: str | None) -> tuple[str | None, str]:
    """The parser, or None, and a reason worth a comment when there is none."""
    if override:
        if override.strip().lower() == "none":
            return None, "tool calling turned off (vllm_tool_parser: none)"
        return override.strip(), f"tool parser {override.strip()} (override)"
    arch = architecture.lower()
    table = _TABLE.get(arch)
    parser = _by_id(arch, table, model_id) if table else None
    if parser is None:
        return (
            None,
            f'no tool-call parser known for architecture "{architecture or "?"}"'
            f"{' and this model id' if table else ''}; set vllm_tool_parser to enable tool calls",
        )
    return parser, f"tool parser {parser} ({arch})"


def against_build(
    parser: str | None,
    override: str | None,
    registered: Collection[str] | None,
    build: str,
) -> tuple[str | None, str | None]:
    """The parser to emit given what the resolved build registers, and a note when it lacks it.

    ``registered`` None (not recorded, a manual row) trusts the table. A ``vllm_tool_parser``
    override still wins (it may come from ``--tool-parser-plugin``) but an unknown name is
    warned about; a table parser the build lacks turns tool calling off instead.
    """
    if parser is None or registered is None or parser in registered:
        return parser, None
    names = ", ".join(sorted(registered)) or "none"
    if override:
        return parser, (
            f"{_OVERRIDE_WARNING}{parser} is not a tool parser {build} registers; "
            f"it registers: {names}"
        )
    has = f"; vLLM {KNOWN_VERSION} has it" if parser in KNOWN_PARSERS else ""
    return None, (
        f"tool calling off: {build} does not register the {parser} tool parser this model "
        f"family uses{has}; install a vLLM that has it, or set vllm_tool_parser"
    )


def is_override_warning(note: str) -> bool:
    """Whether a plan note is :func:`against_build`'s warning about a ``vllm_tool_parser``."""
    return note.startswith(_OVERRIDE_WARNING)
