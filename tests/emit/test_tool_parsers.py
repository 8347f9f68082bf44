"""Tool-call parsers per model family (SPEC §12.4), checked against what each vLLM build
registers: the registry is read from the build's own Python at install (a real venv holding a
fake ``vllm`` package with a ``ToolParserManager``) and recorded in its receipt."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from backendmgr.emit import tools
from backendmgr.emit.tools import KNOWN_PARSERS, against_build, tool_parser
from backendmgr.install import venv_probe
from tests.support.cli import Cli, ok
from tests.support.ggufs import LLAMA3_8B, write_hf
from tests.support.wheels import TOY_MANIFEST as MANIFEST
from tests.support.wheels import make_wheel


@pytest.mark.parametrize(
    ("model_type", "model_id", "parser"),
    [
        # HF config.json model_type
        ("gpt_oss", "gpt-oss-20b", "openai"),
        ("qwen3_next", "qwen3-next-80b-a3b-instruct", "hermes"),
        ("qwen3_next", "qwen3-coder-next", "qwen3_coder"),
        ("qwen3_5_moe", "qwen3.5-35b-a3b", "qwen3_coder"),
        ("mistral", "mistral-7b-instruct-v0.3", "mistral"),
        ("mixtral", "mixtral-8x7b-instruct-v0.1", "mistral"),
        ("mistral3", "mistral-small-3.1-24b-instruct-2503", "mistral"),
        ("mistral", "hermes-2-pro-mistral-7b", "hermes"),
        ("deepseek_v3", "deepseek-v3-0324", "deepseek_v3"),
        ("deepseek_v3", "deepseek-r1-0528", "deepseek_v3"),
        ("deepseek_v3", "deepseek-v3.1", "deepseek_v31"),
        ("deepseek_v3", "deepseek-v3.1-terminus", "deepseek_v31"),
        ("deepseek_v2", "deepseek-v2-lite-chat", None),
        ("llama4", "llama-4-scout-17b-16e-instruct", "llama4_json"),
        ("llama", "llama-3.1-8b-instruct", "llama3_json"),
        ("llama", "hermes-3-llama-3.1-8b", "hermes"),
        ("glm4_moe", "glm-4.5-air", "glm45"),
        ("glm4_moe", "glm-4.6", "glm45"),
        ("glm4_moe", "glm-4.7", "glm47"),
        ("glm4_moe_lite", "glm-4.7-flash", "glm47"),
        ("gemma4", "gemma-4-31b-it", "gemma4"),
        ("gemma3", "gemma-3-27b-it", None),
        ("granite", "granite-3.1-8b-instruct", "granite"),
        ("granite", "granite-4.0-micro", "granite4"),
        ("granitemoehybrid", "granite-4.0-h-small", "granite4"),
        ("phi3", "phi-4-mini-instruct", "phi4_mini_json"),
        ("phi3", "phi-4", None),
        ("phi3", "phi-3-mini-4k-instruct", None),
        ("kimi_k2", "kimi-k2-instruct", "kimi_k2"),
        ("minimax_m2", "minimax-m2", "minimax_m2"),
        ("olmo3", "olmo-3-7b-instruct", "olmo3"),
        ("jamba", "ai21-jamba-1.5-mini", "jamba"),
        # GGUF general.architecture
        ("gpt-oss", "gpt-oss-20b-mxfp4", "openai"),
        ("qwen3next", "qwen3-next-80b-a3b-instruct-q4_k_m", "hermes"),
        ("llama", "mistral-7b-instruct-v0.3-q4_k_m", "mistral"),
        ("llama", "mixtral-8x7b-instruct-v0.1-q4_k_m", "mistral"),
        ("llama4", "llama-4-scout-17b-16e-instruct-q4_k_m", "llama4_json"),
        ("deepseek2", "deepseek-v3-0324-q2_k", "deepseek_v3"),
        ("deepseek2", "deepseek-v3.1-terminus-q4_k_m", "deepseek_v31"),
        ("deepseek2", "kimi-k2-instruct-q2_k", "kimi_k2"),
        ("deepseek2", "deepseek-v2-lite-chat-q4_k_m", None),
        ("glm4moe", "glm-4.7-q4_k_m", "glm47"),
        ("glm4moe", "glm-4.5-air-q4_k_m", "glm45"),
        ("granitehybrid", "granite-4.0-h-tiny-q4_k_m", "granite4"),
        ("phi3", "phi-4-mini-instruct-q4_k_m", "phi4_mini_json"),
        ("minimax-m2", "minimax-m2-q3_k_m", "minimax_m2"),
        ("gemma4", "gemma-4-e4b-it-q4_k_m", "gemma4"),
    ],
)
def test_family_table(model_type: str, model_id: str, parser: str | None) -> None:
    got, why = tool_parser(model_type, model_id, None)
    assert got == parser, why
    if parser is None:
        assert why.startswith("no tool-call parser known")


def test_every_table_parser_is_one_vllm_registers() -> None:
    """A typo in the table would be a parser no vLLM has: tool calling off everywhere."""
    assert set(tools._TABLE.values()) <= KNOWN_PARSERS
    assert {"qwen3_coder", "hermes", "deepseek_v31", "kimi_k2", "glm47", "granite4"} <= (
        KNOWN_PARSERS
    )


def test_against_build() -> None:
    build = "vLLM build vllm@0.9.0-cuda"
    assert against_build("openai", None, None, build) == ("openai", None)  # unknown: trust
    assert against_build("openai", None, ["hermes", "openai"], build) == ("openai", None)
    parser, note = against_build("openai", None, ["hermes"], build)
    assert parser is None and note is not None
    assert "does not register the openai tool parser" in note and "vLLM 0.33.0 has it" in note
    parser, note = against_build("bogus", "bogus", ["hermes", "mistral"], build)
    assert parser == "bogus" and note is not None  # the override still wins, with a warning
    assert tools.is_override_warning(note) and note.endswith("it registers: hermes, mistral")
    assert against_build(None, "none", ["hermes"], build) == (None, None)


# --- through the real CLI: a vLLM build's receipt lists the parsers it registers -------------

OLD_REGISTRY = """\
class ToolParserManager:
    tool_parsers = {}

for _name in ("hermes", "llama3_json", "mistral"):
    ToolParserManager.tool_parsers[_name] = object
"""
NEW_REGISTRY = """\
class ToolParserManager:
    tool_parsers = {"hermes": object}
    lazy_parsers = {}

for _name in ("llama3_json", "mistral", "openai"):
    ToolParserManager.lazy_parsers[_name] = ("vllm.tool_parsers.x", "X")
"""
GPT_OSS = {
    **LLAMA3_8B,
    "architectures": ["GptOssForCausalLM"],
    "model_type": "gpt_oss",
    "num_hidden_layers": 24,
}


def registry_at(path: str, body: str) -> dict[str, str]:
    parts = path.split(".")
    files = {"/".join(parts[:i]) + "/__init__.py": "" for i in range(1, len(parts))}
    files["/".join(parts) + "/__init__.py"] = body
    return files


@pytest.fixture
def toy(tmp_path: Path, config_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An offline wheel folder and the toy manifest; uv builds the venvs."""
    wheels = tmp_path / "wheels"
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheels))
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("UV_NO_CACHE", "1")
    monkeypatch.delenv("BACKENDMGR_OFFLINE")
    uv = Path(sys.executable).parent / "uv"
    assert uv.is_file(), "the test extras install uv"
    monkeypatch.setenv("BACKENDMGR_UV", str(uv))
    manifests = config_path.parent / "manifests"
    manifests.mkdir(parents=True)
    (manifests / "toy.yaml").write_text(MANIFEST)
    models = tmp_path / "models"
    write_hf(models / "gpt-oss-20b", GPT_OSS, weights=1 << 20)
    config_path.write_text(f"models_dirs: [{json.dumps(str(models))}]\n")
    return wheels


def receipt(tmp_path: Path, version: str) -> dict[str, object]:
    path = tmp_path / "home" / "builds" / "toy" / f"{version}-cpu" / ".backendmgr.json"
    data: dict[str, object] = json.loads(path.read_text())
    return data


def gpt_oss_entry(cli: Cli, config_path: Path) -> tuple[dict[str, object], str]:
    ok(cli("generate", "--force"))
    text = (config_path.parent / "llama-swap.yaml").read_text()
    models = YAML(typ="safe").load(text)["models"]
    (entry,) = [v for k, v in models.items() if k.startswith("gpt-oss-20b")]
    return entry, text


def test_an_older_build_without_the_parser_leaves_tool_calling_off(
    cli: Cli, toy: Path, tmp_path: Path, config_path: Path
) -> None:
    make_wheel(
        toy, "1.0.0", extra=registry_at("vllm.entrypoints.openai.tool_parsers", OLD_REGISTRY)
    )
    make_wheel(toy, "2.0.0", extra=registry_at("vllm.tool_parsers", NEW_REGISTRY))
    ok(cli("install", "toy", "1.0.0", "--activate"))
    assert receipt(tmp_path, "1.0.0")["tool_parsers"] == ["hermes", "llama3_json", "mistral"]
    entry, text = gpt_oss_entry(cli, config_path)
    assert "--tool-call-parser" not in str(entry["cmd"])
    assert "--enable-auto-tool-choice" not in str(entry["cmd"])
    assert "tools" not in entry["capabilities"]  # type: ignore[operator]
    assert (
        "# NOTE tool calling off: vLLM build toy@1.0.0-cpu does not register the openai tool "
        "parser this model family uses; vLLM 0.33.0 has it" in text
    )
    shown = json.loads(ok(cli("--json", "models")).out)
    (model,) = [m for m in shown if m["id"].startswith("gpt-oss-20b")]
    assert any("does not register the openai tool parser" in n for n in model["notes"])

    ok(cli("install", "toy", "2.0.0", "--activate"))
    assert receipt(tmp_path, "2.0.0")["tool_parsers"] == [
        "hermes",
        "llama3_json",
        "mistral",
        "openai",
    ]
    entry, text = gpt_oss_entry(cli, config_path)
    assert str(entry["cmd"]).splitlines()[-1] == (
        "--enable-auto-tool-choice --tool-call-parser openai"
    )
    assert entry["capabilities"]["tools"] is True  # type: ignore[index]
    assert "tool calling off" not in text


def test_an_unknown_vllm_tool_parser_is_a_warning_naming_the_registered_ones(
    cli: Cli, toy: Path, tmp_path: Path, config_path: Path
) -> None:
    make_wheel(toy, "2.0.0", extra=registry_at("vllm.tool_parsers", NEW_REGISTRY))
    ok(cli("install", "toy", "2.0.0", "--activate"))
    model = next(
        m["id"]
        for m in json.loads(ok(cli("--json", "models")).out)
        if m["id"].startswith("gpt-oss-20b")
    )
    result = ok(cli("set", model, "vllm_tool_parser=openai_harmony"))
    expected = (
        "vllm_tool_parser openai_harmony is not a tool parser vLLM build toy@2.0.0-cpu "
        "registers; it registers: hermes, llama3_json, mistral, openai"
    )
    assert expected in result.err
    entry, text = gpt_oss_entry(cli, config_path)
    # The setting still wins (a --tool-parser-plugin may register it), with the note.
    assert "--tool-call-parser openai_harmony" in str(entry["cmd"])
    assert f"# NOTE {expected}" in text
    assert "registers" not in ok(cli("set", model, "vllm_tool_parser=openai")).err


@pytest.mark.parametrize(
    "registry",
    [
        'raise RuntimeError("no GPU")',  # the import fails
        "import sys\nsys.exit(3)",  # the probe's Python exits
        'print("backendmgr-tool-parsers:" + "[\\"ok\\", \\"rm -rf /;\\"]")\nraise SystemExit',
        'import sys\nsys.stdout.write("x" * (1 << 20) + "\\n")\n' + NEW_REGISTRY,  # floods stdout
        "import time\ntime.sleep(60)",  # hangs past the probe's timeout
    ],
    ids=["import-error", "exit", "bad-names", "flood", "hang"],
)
def test_a_probe_that_fails_is_unknown_never_a_failed_install(
    cli: Cli,
    toy: Path,
    tmp_path: Path,
    config_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    registry: str,
) -> None:
    monkeypatch.setattr(venv_probe, "PROBE_TIMEOUT_S", 3.0)
    make_wheel(toy, "1.0.0", extra=registry_at("vllm.tool_parsers", registry))
    ok(cli("install", "toy", "1.0.0", "--activate"))
    assert receipt(tmp_path, "1.0.0")["tool_parsers"] is None
    entry, _ = gpt_oss_entry(cli, config_path)  # unknown: the table's parser, as before
    assert str(entry["cmd"]).splitlines()[-1] == (
        "--enable-auto-tool-choice --tool-call-parser openai"
    )
