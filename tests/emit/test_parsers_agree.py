"""The emitted llama-swap config reads back the same through ruamel's C parser (libyaml, from
``ruamel.yaml.clib``: what ``YAML(typ="safe")`` uses where it is installed, so what the
re-read before every write and ``generate --check``/``doctor`` use) and through its pure
Python one (what they used before, and what is left where no C extension installs).

The two differ on documents backendmgr never writes (a ``%YAML 1.1`` directive, a tab after
``: ``, U+2028 in a plain scalar); these tests hold the emitter to text on which they agree,
for hostile values in every place a value lands: keys, values, lists, the literal ``cmd``, and
the comments (a comment that ended its line early would change the data). The event streams
that :func:`backendmgr._yaml.check_yaml` bounds are compared too, and the bounds themselves
are held under both parsers.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML

from backendmgr._yaml import check_yaml
from backendmgr.config.models import BackendRow
from backendmgr.discovery.models import DiscoveredModel
from backendmgr.emit.document import build_document, document_of, dump
from backendmgr.emit.plan import Entry, Skip
from backendmgr.emit.verify import reread_emitted
from backendmgr.errors import ConfigError
from backendmgr.registry.resolve import Resolution

C_PARSER = YAML(typ="safe").Parser
PURE_PARSER = YAML(typ="safe", pure=True).Parser
both = pytest.mark.skipif(
    C_PARSER is PURE_PARSER, reason="no C parser here: the pure one reads everything"
)

HOSTILE = [
    *("yes", "No", "ON", "off", "y", "N", "~", "null", "True", "1e3", "0o17", "017", "0x1F"),
    *(".inf", "-.NaN", "2001-12-14", "12:30:00", "1_000", "<<", "=", "-", "? x", "a: b"),
    *("a #b", "#x", "&a", "*a", "!tag", "%YAML 1.1", "---", "...", "|", ">", "'", '"', "\\"),
    *("@", "`", "${env.HOME}", "${env.X}", "$${env.X}", "${PORT}", "${", "}"),
    *("\x00", "\x01", "\x07", "\t", "\n", "\r", "\r\n", "\x1b[31m", "\x7f", "\x85", "\u2028"),
    *("\u2029", "\ufeff", "\u202e", "\u200b", "\u2066", "\u00a0", "\ue000", "\U0001f600"),
    *("é", "模型", "a\u202eb", "x\u2028- y: z", " lead", "trail ", "  ", "", "x: y\tz"),
    "x" * 20_000,
    "é${" * 3_000,
    "a " * 5_000,
    "- " * 2_000,
]


def _entry(model_id: str, value: str) -> Entry:
    row = BackendRow(id="r", kind="llama", path="/bin/llama-server")
    model = DiscoveredModel(id=model_id, path=f"/m/{model_id}.gguf", format="gguf")
    return Entry(
        model=model,
        resolution=Resolution(cls="llm", row=row, reason="default", exe=row.path),
        groups=[["/bin/llama-server"], ["-m", model.path], ["--alias", value]],
        extra_args="",
        ttl=0,
        comment=value,
        metadata={"v": value, value: [value, {value: value}]},
        capabilities={},
        unlisted=None,
        passthrough={"description": value, "aliases": [value], "env": [f"X={value}"]},
        notes=(value,),
    )


def _document(values: list[str]) -> Any:
    entries = [_entry(f"m{i}{v}", v) for i, v in enumerate(values)]
    entries += [_entry(v, v) for v in dict.fromkeys(values) if v]  # the value as the key
    entries.append(_entry("plain", "ok"))  # a cmd of printable lines: the literal block
    skipped = [Skip(f"s{v}", f"/m/{v}", v) for v in values]
    return build_document(
        version="t\u202e",
        inputs_hash="0" * 64,
        health_check_timeout=30,
        passthrough={"hooks": {"note": values}, **{f"k{v}": v for v in values}},
        entries=sorted(entries, key=lambda e: e.model.id),
        skipped=skipped,
    )


def _events(text: str, *, pure: bool) -> list[tuple[Any, ...]]:
    return [
        (type(e).__name__, getattr(e, "anchor", None), getattr(e, "value", None))
        for e in YAML(typ="safe", pure=pure).parse(text)
    ]


def _agree(values: list[str]) -> None:
    document = _document(values)
    text = dump(document)
    data, problems = reread_emitted(document, text)  # through the C parser
    assert not [p for p in problems if "would not read back" in p], problems
    assert data is not None
    assert YAML(typ="safe", pure=True).load(text) == data
    assert _events(text, pure=False) == _events(text, pure=True)


@both
def test_the_parsers_read_every_hostile_value_alike() -> None:
    _agree(HOSTILE)


@both
@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(st.characters(exclude_categories=["Cs"]), max_size=40), max_size=4))
def test_the_parsers_read_any_text_alike(values: list[str]) -> None:
    _agree(values)


@both
def test_a_difference_between_the_parsers_is_seen() -> None:
    """What the comparison above would catch: documents the two parsers read apart."""
    for text in ("a: b\u2028c\n", "a: \t1\n", "%YAML 1.1\n---\nx: 017\n"):
        try:
            pure = YAML(typ="safe", pure=True).load(text)
        except Exception as exc:  # one of them refuses it
            pure = type(exc)
        try:
            fast = YAML(typ="safe").load(text)
        except Exception as exc:
            fast = type(exc)
        assert pure != fast, text


@pytest.mark.parametrize("pure", [False, True])
def test_the_bounds_hold_under_either_parser(pure: bool) -> None:
    deep = "[" * 1_000_000 + "]" * 1_000_000
    with pytest.raises(ConfigError, match="nested more than 64 levels"):
        check_yaml(deep, "f", pure=pure)
    laughs = "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
    for name, prev in zip("bcdef", "abcde", strict=False):
        laughs += f"{name}: &{name} [{', '.join([f'*{prev}'] * 10)}]\n"
    with pytest.raises(ConfigError, match="aliases expand to more than 200000 values"):
        check_yaml(laughs, "f", pure=pure)
    with pytest.raises(ConfigError, match="inside the value it names"):
        check_yaml("a: &a [1, *a]\n", "f", pure=pure)
    check_yaml("a: &a [1, 2]\nb: *a\n", "f", pure=pure)
    # few values, but each alias of a long one is its whole text again to whatever walks it
    long = "a: &a '" + "x" * (1 << 20) + "'\nb: [{}]\n"
    with pytest.raises(ConfigError, match="line 2: aliases expand to more than 16 MiB of text"):
        check_yaml(long.format(", ".join(["*a"] * 16)), "f", pure=pure)
    check_yaml(long.format(", ".join(["*a"] * 14)), "f", pure=pure)
    # as many values written out, no alias anywhere: said as what it is, not as an alias bomb
    many = "".join(f"k{i}: 1\n" for i in range(100_001))
    with pytest.raises(ConfigError, match=r"more than 200000 values; this is not a backendmgr"):
        check_yaml(many, "f", pure=pure)


def test_the_re_read_names_what_would_not_read_back() -> None:
    """The comparison the re-read makes (ruamel's nodes against the data read) sees a value
    that changed, one of another type, a key added and a document that is no mapping."""
    document = _document(["v"])
    text = dump(document)
    assert not [p for p in reread_emitted(document, text)[1] if "would not read back" in p]
    for changed in (
        text.replace("description: v\n", "description: w\n", 1),
        text.replace("description: v\n", "description: 1\n", 1),
        text.replace("    ttl: 0\n", "    ttl: 0\n    extra: 1\n", 1),
    ):
        assert changed != text
        assert reread_emitted(document, changed)[1] == [
            "model 'm0v' would not read back as written"
        ]
    assert reread_emitted(document, "healthCheckTimeout: 30\n")[1] == [
        "model 'm0v' would not read back as written"  # the models are missing: the first
    ]
    top = text.replace("\nkv: v\n", "\nkv: w\n", 1)
    assert top != text
    assert reread_emitted(document, top)[1] == ["the document would not read back as written"]
    not_a_mapping = (None, ["model 'm0v' would not read back as written"])
    assert reread_emitted(document, "- 1\n") == not_a_mapping


def test_the_version_looked_up_once_reads_as_ruamel_does() -> None:
    """``_ruamel.OnceResolver`` (the YAML version asked once per document) reads what ruamel's
    own resolver reads, a ``%YAML 1.1`` directive and 1.1's words and numbers included."""
    from backendmgr._ruamel import safe_yaml

    for text in (
        "%YAML 1.1\n---\nx: yes\ny: 017\nz: 1:30\nw: 0b11\n",
        "%YAML 1.2\n---\nx: yes\ny: 0o17\nz: 1_000\n",
        "x: yes\ny: 017\nz: [on, ~, 2001-12-14, .inf, 0x1F, '017']\n",
    ):
        assert safe_yaml().load(text) == YAML(typ="safe").load(text), text


def _libyaml_emits() -> bool:
    from backendmgr.emit.document import _emitter

    return "clib" in _emitter().__module__


libyaml = pytest.mark.skipif(
    not _libyaml_emits(), reason="no libyaml emitter here: the pure one writes everything"
)


@libyaml
def test_libyaml_and_the_pure_emitter_write_the_same_text() -> None:
    """Where ``ruamel.yaml.clib`` is not installed, ruamel's pure ``Emitter`` writes the text
    from the same events: the file must not depend on which one ran."""
    document = _document(HOSTILE)
    text = dump(document)
    assert text == dump(document, pure=True)
    assert "\u202e" not in text and "\ufeff" not in text and "\u2028" not in text
    # libyaml escapes what lies beyond U+FFFF; so does the pure emitter here, in that piece
    values = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
    assert not [line for line in values if "\U0001f600" in line]
    assert [line for line in values if "\\U0001F600" in line]


@libyaml
@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(st.characters(exclude_categories=["Cs"]), max_size=40), max_size=4))
def test_the_two_emitters_write_any_text_alike(values: list[str]) -> None:
    document = _document(values)
    assert dump(document) == dump(document, pure=True)


def test_without_the_c_extension_the_pure_emitter_writes_the_file() -> None:
    """Where ``ruamel.yaml.clib`` does not install (its marker), ``dump`` takes ruamel's pure
    ``Emitter``, and the text is the same."""
    from tests.support.noclib import without_clib

    code = (
        "import json\n"
        "from backendmgr.emit.document import _emitter, document_of, dump\n"
        "assert 'clib' not in _emitter().__module__\n"
        "values = json.loads(sys.stdin.read())\n"
        "models = {v: {'cmd': v, 'env': [v]} for v in values if v}\n"
        "print(json.dumps(dump(document_of({'k': values, 'models': models}, header=values))))"
    )
    values = [v for v in HOSTILE if len(v) < 100]
    written = without_clib(code, values)
    models = {v: {"cmd": v, "env": [v]} for v in values if v}
    document = document_of({"k": values, "models": models}, header=values)
    assert written == dump(document)
    assert reread_emitted(document, dump(document))[0] == document.data


@both
def test_a_kept_parse_names_the_parser_that_made_it() -> None:
    """The stamp of a kept parse (the config's snapshot, the manifests, the written file's
    models) changes when the C parser comes or goes, as when ruamel.yaml itself changes."""
    import subprocess
    import sys

    from backendmgr._yaml import parser_name

    code = (
        "import sys; sys.modules['_ruamel_yaml'] = None\n"  # as where it does not install
        "from ruamel.yaml import YAML; from ruamel.yaml.parser import Parser\n"
        "assert YAML(typ='safe').Parser is Parser\n"
        "from backendmgr._yaml import parser_name; print(parser_name())"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    without = done.stdout.strip()
    assert done.returncode == 0 and without, done.stderr
    assert parser_name() != without and parser_name().startswith(without + " _ruamel_yaml ")
