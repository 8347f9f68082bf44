"""Start-up cost: the paths run at every prompt and <TAB> load no heavy library (issue 14)."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.startup import HEAVY, loaded_after

# what --help and <TAB> on a command's name do without (issue 30)
LIGHT_PATHS = ("dataclasses", "pathlib", "hashlib", "backendmgr.errors")


@pytest.mark.parametrize("argv", [("--help",), ("__complete", "--", "ins")])
def test_prompt_paths_load_no_heavy_library(argv: tuple[str, ...]) -> None:
    """Nor what a command's own parser needs (the request classes: dataclasses), a path
    (pathlib) or the words of a mistake (``errors``): each costs a tenth of ``--help``."""
    out, loaded = loaded_after(*argv, heavy=(*HEAVY, *LIGHT_PATHS))
    assert loaded == []
    assert "install" in out


def test_completing_a_component_reads_the_manifests_without_the_manager(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``install <TAB>``: every manifest's id, the user's too, with no pydantic (the catalog
    validates them when a command runs); a broken manifest is left out, not an error."""
    user = tmp_path / "cfg" / "manifests"  # beside the config file
    user.mkdir(parents=True)
    (user / "mine.yaml").write_text("id: my-server\nkind: llama\n")
    (user / "broken.yaml").write_text("id: [unclosed\n")
    monkeypatch.setenv("BACKENDMGR_CONFIG", str(tmp_path / "cfg" / "config.yaml"))
    out, loaded = loaded_after("__complete", "--", "install", "")
    assert out.split() == [
        "llama-server",
        "llama-swap",
        "sd-server",
        "upscaler",
        "vllm",
        "my-server",
    ]
    assert "pydantic" not in loaded
    assert loaded_after("__complete", "--", "install", "my")[0].split() == ["my-server"]


def test_completing_a_built_in_component_parses_no_yaml(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 30: a built-in manifest's id is its file's name (the catalog refuses one that says
    otherwise), so ``install <TAB>`` lists them without reading one; ``--variant <TAB>`` reads
    the one manifest it names: its YAML, and once the catalog kept its parse, that parse."""
    from backendmgr.catalog.manifest import load_catalog

    monkeypatch.setenv("BACKENDMGR_CONFIG", str(tmp_path / "cfg" / "config.yaml"))
    monkeypatch.setenv("BACKENDMGR_HOME", str(tmp_path / "home"))
    out, loaded = loaded_after("__complete", "--", "install", "", heavy=(*HEAVY, "pathlib"))
    assert out.split() == load_catalog().ids() and loaded == []
    variant = ("__complete", "--", "install", "vllm", "--variant", "")
    out, loaded = loaded_after(*variant)
    assert out.split() == ["cuda", "cpu", "rocm"] and loaded == ["ruamel.yaml"]
    (tmp_path / "home").mkdir()
    list(load_catalog(cache=tmp_path / "home" / "cache"))
    assert loaded_after(*variant, heavy=(*HEAVY, "hashlib")) == (out, [])  # its slot: a CRC


def test_completing_a_build_reads_local_state_without_pydantic() -> None:
    out, loaded = loaded_after("__complete", "--", "activate", "")
    assert out.split() == []  # nothing installed in this fresh home
    assert loaded == []  # receipts are records, read back strictly (issue 30)


def test_a_command_makes_only_its_own_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 30: making a request class is most of a command's parser's cost, so ``list``
    makes its own request and no sibling's in the same command module; <TAB> makes none (it
    reads the grammar the parsers were written out to, :mod:`backendmgr.cli.grammar`)."""
    from backendmgr import requests

    _one_model_home(tmp_path, monkeypatch, "tiny-q4_k_m")
    modules = {m for m in requests._WHERE.values() if not m.startswith("_")}
    groups = tuple(sorted(f"backendmgr.requests.{m}" for m in modules))
    for argv, wanted in (
        (("__complete", "--", "install", ""), []),
        (("__complete", "--", "install", "--"), []),
        (("list",), ["backendmgr.requests.listing"]),
    ):
        out, loaded = loaded_after(*argv, heavy=groups)
        assert out.strip() and loaded == wanted, argv


@pytest.mark.parametrize(
    "words",
    [
        ("ins",),
        ("install", ""),
        ("install", "--"),
        ("install", "vllm", "--variant", ""),
        ("bench", "--"),
    ],
)
def test_tab_builds_no_parser(words: tuple[str, ...]) -> None:
    """The scripts' ``__complete`` is answered from the grammar: no argparse, no request class
    (dataclasses, and through it inspect and ast: more than the rest of a <TAB>)."""
    out, loaded = loaded_after("__complete", "--", *words, heavy=("argparse", "dataclasses"))
    assert out.strip() and loaded == []


def test_tab_after_global_options_answers_the_same() -> None:
    """The scripts call ``__complete --`` first (answered without a parser); with global options
    before it the parser routes it, to the same answer."""
    for words in (("ins",), ("install", ""), ("install", "--"), ("pin", "--no"), ("cache", "")):
        fast = loaded_after("__complete", "--", *words)[0]
        assert fast.strip() and loaded_after("-q", "__complete", "--", *words)[0] == fast, words


def test_tab_reads_options_as_the_parser_does(tmp_path: Path) -> None:
    """argparse takes ``--config=PATH`` and a long option's unique prefix (``--conf PATH``,
    ``--vari X``, ``--js``) as the option, and every word after ``--`` as an operand: <TAB>,
    the choice of the command's parser and the JSON form of a usage error read them so too."""
    import io

    from backendmgr.cli.complete import complete, option_of
    from backendmgr.cli.grammar import GRAMMAR
    from backendmgr.cli.parser import build_parser
    from tests.support.ggufs import write_gguf

    write_gguf(tmp_path / "m" / "alpha.gguf", "llama", layers=2, ctx=4096)
    config = tmp_path / "elsewhere" / "config.yaml"
    config.parent.mkdir()
    config.write_text(f"models_dirs: [{json.dumps(str(tmp_path / 'm'))}]\n")

    def tab(*words: str) -> list[str]:
        out = io.StringIO()
        assert complete(["--", *words], out) == 0
        return out.getvalue().split()

    for given in (["--conf", str(config)], [f"--config={config}"], [f"--con={config}"]):
        argv = [*given, "pin", "x", "r"]
        assert build_parser(argv).parse_args(argv).config == str(config), given
        assert tab(*given, "pin", "") == ["alpha"], given
        # and the command is found after it: only its parser is built (cli.parser.command_of)
        assert f"config:    {config}" in loaded_after(*given, "config", "path")[0], given
    for exact, prefix in (("--variant", "--vari"), ("--limit", "--lim")):
        argv = ["releases", "x", prefix, "1"]
        assert str(getattr(build_parser(argv).parse_args(argv), exact[2:])) == "1"
        assert tab("releases", "vllm", prefix, "") == tab("releases", "vllm", exact, "")
        assert tab("releases", prefix, "1", "ll") == tab("releases", exact, "1", "ll") != []
    assert sorted(tab("install", "vllm", "--vari=c")) == ["--vari=cpu", "--vari=cuda"]
    assert option_of(GRAMMAR[""], "--h") is None  # --help or --home: argparse refuses it
    # after "--" argparse reads every word as an operand: no option, no option's value
    argv = ["install", "--", "--variant"]
    assert build_parser(argv).parse_args(argv).component == "--variant"
    assert tab("install", "--", "--variant", "") == tab("install", "--", "--var") == []
    assert tab("install", "--", "ll") == tab("install", "ll") != []
    # a usage error after an abbreviated --json is the JSON document, as after --json
    for json_option in ("--json", "--js"):
        out = loaded_after(json_option, "no-such-command")[0]
        assert json.loads(out)["exit"] == 2, json_option


def test_the_grammar_is_what_the_parsers_build() -> None:
    """:mod:`backendmgr.cli.grammar` is every parser's arguments as generated from the
    requests; a change to a command's arguments is a change to it
    (``python -m backendmgr.cli.commands.completion`` writes it again)."""
    from backendmgr.cli.commands.completion import grammar, grammar_source
    from backendmgr.cli.grammar import GRAMMAR
    from backendmgr.cli.parser import build_parser

    built = grammar(build_parser())
    assert built == GRAMMAR, "run: python -m backendmgr.cli.commands.completion"
    assert list(GRAMMAR) == list(built)
    source = Path(__file__).parents[2] / "backendmgr" / "cli" / "grammar.py"
    assert source.read_text(encoding="utf-8") == grammar_source()
    install = {a[1]: a for a in GRAMMAR["install"]}  # one field of a request, as it reads it
    assert install["component"] == ((), "component", None, None)
    assert install["smoke"] == (("--no-smoke",), "smoke", 0, None)


def test_the_command_table_is_what_the_modules_build() -> None:
    """``--help`` and unknown commands read the table; a run builds one command's parser."""
    from backendmgr.cli.commands import COMMANDS
    from backendmgr.cli.parser import build_parser

    full = build_parser()
    sub = next(a for a in full._actions if isinstance(a, argparse._SubParsersAction))
    helps = {choice.dest: choice.help for choice in sub._choices_actions}
    assert list(sub.choices) == list(COMMANDS)
    assert {name: helps.get(name) for name in sub.choices} == {
        name: help_text for name, (_, help_text) in COMMANDS.items()
    }
    for module_name in {module for module, _ in COMMANDS.values()}:
        module = importlib.import_module(f"backendmgr.cli.commands.{module_name}")
        own = getattr(module, "PARSERS", None)  # each of its commands' parser on its own
        listed = [name for name, (where, _) in COMMANDS.items() if where == module_name]
        assert own is None or list(own) == listed, module_name
    lazy = build_parser(["--help"])
    assert lazy.format_help() == full.format_help()
    one = build_parser(["--json", "install", "llama-server"])
    lazy_sub = next(a for a in one._actions if isinstance(a, argparse._SubParsersAction))
    assert lazy_sub.choices["install"].format_help() == sub.choices["install"].format_help()
    assert lazy_sub.choices["list"].format_help() != sub.choices["list"].format_help()  # a stand-in


def test_help_and_tab_never_create_the_data_home(tmp_path: Path) -> None:
    """On a fresh account (no config, no data home, platformdirs' defaults under ``HOME``),
    ``--help`` and every kind of <TAB> print their answer and leave ``HOME`` as it was."""
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BACKENDMGR_", "XDG_"))}
    env |= {"HOME": str(fresh), "BACKENDMGR_GPU": "none", "BACKENDMGR_OFFLINE": "1"}
    for words in (
        ["--help"],
        ["list", "--help"],
        ["__complete", "--", "ins"],
        ["__complete", "--", "install", "l"],
        ["__complete", "--", "install", "llama-server", "--variant=c"],
        ["__complete", "--", "activate", ""],
        ["__complete", "--", "pin", ""],
        ["__complete", "--", "default", ""],
        ["__complete", "--", "which", "ll"],
        ["__complete", "--", "set", "m", "c"],
    ):
        done = subprocess.run(
            [sys.executable, "-m", "backendmgr", *words],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, (words, done.stderr)
        assert bool(done.stdout) == (words[-1] != ""), words  # nothing local yet to offer
        assert list(fresh.rglob("*")) == [], words


def test_tab_on_model_ids_leaves_the_discovery_cache_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``pin <TAB>`` reads the models live (a model added since shows at once) and writes
    nothing into the data home, not even the header cache a read command fills."""
    from tests.support.ggufs import write_gguf

    models = tmp_path / "models"
    write_gguf(models / "alpha.gguf", "llama", layers=2, ctx=4096, size_bytes=1 << 20)
    config = tmp_path / "cfg" / "config.yaml"
    config.parent.mkdir()
    config.write_text(f"models_dirs: [{json.dumps(str(models))}]\n")
    home = tmp_path / "home"
    assert loaded_after("__complete", "--", "pin", "")[0].split() == ["alpha"]
    write_gguf(models / "beta.gguf", "llama", layers=2, ctx=4096, size_bytes=1 << 20)
    assert loaded_after("__complete", "--", "pin", "")[0].split() == ["alpha", "beta"]
    assert not home.exists()


def _one_model_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, model: str) -> Path:
    """A config whose models folder holds one small GGUF named ``model``; its path."""
    from tests.support.ggufs import write_gguf

    write_gguf(tmp_path / "m" / f"{model}.gguf", "llama", layers=2, ctx=4096)
    config = tmp_path / "cfg" / "config.yaml"
    config.parent.mkdir()
    config.write_text(f"models_dirs: [{json.dumps(str(tmp_path / 'm'))}]\n")
    monkeypatch.setenv("BACKENDMGR_CONFIG", str(config))
    monkeypatch.setenv("BACKENDMGR_HOME", str(tmp_path / "home"))
    return config


def test_a_read_of_an_unchanged_config_loads_no_yaml_library(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 30: ``models`` plans every model from the config's parsed snapshot, so the YAML
    library is loaded to parse a config that changed, and not again until it changes."""
    config = _one_model_home(tmp_path, monkeypatch, "tiny-q4_k_m")
    out, loaded = loaded_after("models")
    assert "tiny-q4_k_m" in out and "ruamel.yaml" in loaded  # parsed, and kept
    out, loaded = loaded_after("models")
    assert "tiny-q4_k_m" in out and "ruamel.yaml" not in loaded
    config.write_text(config.read_text() + "# edited by hand\n")
    assert "ruamel.yaml" in loaded_after("models")[1]
    # ``which`` asks the catalog for its ids alone: a built-in manifest is named for its id,
    # so none is read (a user's manifest is, and its parse kept in the cache: catalog tests)
    out, loaded = loaded_after("which", "tiny-q4_k_m")
    assert "model → no row" in out and "ruamel.yaml" not in loaded
    assert not (tmp_path / "home" / "cache" / "manifests").exists()


def test_a_table_wider_than_the_pipe_loads_no_rich(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 30: ``models``' reasons make its table wider than the pipe's 200 columns; the
    plain table narrows and folds it as rich would (tests/cli/test_render.py compares them)."""
    name = "a-model-whose-name-is-long-enough-to-widen-the-table-" * 3
    _one_model_home(tmp_path, monkeypatch, f"{name}q4_k_m")
    out, loaded = loaded_after("models")
    widths = {len(line) for line in out.splitlines() if line.startswith(("+", "|"))}
    assert widths == {200} and "rich" not in loaded


def test_reads_and_an_edit_load_neither_pydantic_nor_an_event_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 30: once the config's snapshot and the manifests' parses are kept, every read
    runs on records and plain calls: no pydantic, no event loop (anyio, asyncio), no lock,
    no YAML library, no rich; an edit of that config validates no setting again either."""
    config = _one_model_home(tmp_path, monkeypatch, "tiny-q4_k_m")
    manual = {"id": "mine", "kind": "llama", "path": sys.executable}
    config.write_text(config.read_text() + f"backends: [{json.dumps(manual)}]\n")
    for _ in range(2):  # the first read keeps the config's parse and makes the data home,
        loaded_after("which", "tiny-q4_k_m")  # the second keeps the manifests' there too
    heavy = ("pydantic", "asyncio", "anyio", "filelock", "ruamel.yaml", "rich", "httpx")
    for argv in (
        ("list",),
        ("backends",),
        ("which", "tiny-q4_k_m"),
        ("models",),
        ("cmd", "tiny-q4_k_m"),
        ("config", "path"),
    ):
        out, loaded = loaded_after(*argv, heavy=heavy)
        assert out.strip() and loaded == [], argv
    for argv in (("list",), ("backends",)):  # the snapshot is stamped with the config's bytes
        assert loaded_after(*argv, heavy=("hashlib",))[1] == [], argv  # no OpenSSL to load
    # ``set`` validates the values a person typed (pydantic); ``pin`` names a row, and needs
    # only the lock and the YAML library it edits with; with no llama-swap to follow up, no
    # edit starts an event loop (its services' awaits run inline: backendmgr._inline)
    out, loaded = loaded_after("pin", "tiny-q4_k_m", "mine", heavy=heavy)
    assert "pinned" in out and "pydantic" not in loaded
    loop = {"asyncio", "anyio"}
    assert not loop & set(loaded), loaded
    for argv in (
        ("set", "tiny-q4_k_m", "ctx=2048"),
        ("unpin", "tiny-q4_k_m"),
        ("generate", "--force"),
        ("-q", "generate"),
    ):
        out, loaded = loaded_after(*argv, heavy=heavy)
        assert not loop & set(loaded), (argv, loaded)
    out, loaded = loaded_after("--json", "list", heavy=heavy)
    assert json.loads(out) == [] and loaded == []


def test_an_edit_loads_only_what_it_uses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 30: an edit makes its own request and result, not its siblings' (``unset``'s,
    ``unpin``'s, the ``models`` commands') nor ``generate``'s for its regeneration; on a
    machine with no build installed it reads no receipt and orders no version
    (``packaging``), and it copies no file (``shutil``, ``tempfile``: a hand-edited output's
    backup) nor checks the written one as ``doctor`` does."""
    from backendmgr import api_models, requests

    config = _one_model_home(tmp_path, monkeypatch, "tiny-q4_k_m")
    manual = {"id": "mine", "kind": "llama", "path": sys.executable}
    config.write_text(config.read_text() + f"backends: [{json.dumps(manual)}]\n")
    monkeypatch.setenv("BACKENDMGR_VRAM_GB", "24")  # the card's size given: no probe to find
    loaded_after("generate")  # the first run writes the output and keeps the config's parse
    made = {f"backendmgr.requests.{m}" for m in requests._WHERE.values() if m != "_shared"}
    made |= {f"backendmgr.api_models.{m}" for m in api_models._WHERE.values() if m != "_shared"}
    unused = (
        "backendmgr.install.receipt",
        "backendmgr.registry.installed",
        "packaging.version",
        "shutil",
        "tempfile",
        "backendmgr.manager.findings",
    )
    heavy = (*sorted(made), *unused)
    for argv, own in (
        (("set", "tiny-q4_k_m", "ctx=2048"), ("requests.overrides", "api_models.overrides")),
        (("unset", "tiny-q4_k_m", "ctx"), ("requests.unset", "api_models.overrides")),
        (("pin", "tiny-q4_k_m", "mine"), ("requests.pins", "api_models.pins")),
        (("unpin", "tiny-q4_k_m"), ("requests.unpin", "api_models.pins")),
        (("generate", "--force"), ("requests.generate", "api_models.generate")),
    ):
        wanted = {f"backendmgr.{m}" for m in own}
        out, loaded = loaded_after(*argv, heavy=heavy)
        assert out.strip() and set(loaded) == wanted, (argv, loaded)


def test_a_read_makes_only_its_own_result_classes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 30: ``api_models`` loads a group's module when one of its results is named, so
    ``list`` and ``backends`` make the two inventory classes, not all forty."""
    from backendmgr import api_models

    _one_model_home(tmp_path, monkeypatch, "tiny-q4_k_m")
    groups = tuple(sorted({f"backendmgr.api_models.{m}" for m in api_models._WHERE.values()}))
    for argv, wanted in (
        (("list",), ["inventory"]),
        (("backends",), ["inventory"]),
        (("models",), ["models"]),
    ):
        out, loaded = loaded_after(*argv, heavy=groups)
        assert out.strip() and loaded == [f"backendmgr.api_models.{m}" for m in wanted], argv
