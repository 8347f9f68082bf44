"""The proof before every write (:func:`backendmgr.emit.verify.reread_emitted`): the text is
walked, event by event, against the document's data, and a text that would read back as
anything else is refused, whichever parser reads it (libyaml's, or ruamel's pure one where
``ruamel.yaml.clib`` is not installed). Each way a text can differ from the data it should
say is tried here: a changed value, a type change, a key or item dropped or added, keys
reordered or repeated, an alias, an anchor, a tag, a merge key, a directive, a second
document, and a comment that lost its line break and swallowed the next line."""

from __future__ import annotations

import datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML

from backendmgr.emit.document import Document, document_of, dump
from backendmgr.emit.verify import _reads_back, _same, reread_emitted
from tests.support.noclib import without_clib

C_PARSER = YAML(typ="safe").Parser
PARSERS = [
    pytest.param(
        False,
        id="libyaml",
        marks=pytest.mark.skipif(
            C_PARSER is YAML(typ="safe", pure=True).Parser, reason="no C parser here"
        ),
    ),
    pytest.param(True, id="pure"),
]

DATA = {
    "healthCheckTimeout": 30,
    "flag": True,
    "word": "true",  # a string that plain would make a boolean: written quoted
    "ratio": 1.5,
    "nothing": None,
    "models": {
        "a": {
            "cmd": "run\n--port ${PORT}",
            "ttl": 0,
            "env": ["X=1", "Y=2"],
            "aliases": ["x", "y"],
            "metadata": {"list": ["p", "q"], "same": ["p", "q"]},
        },
        "b": {"cmd": "go --port ${PORT}", "ttl": 5},
    },
}


def _doc() -> tuple[Document, str]:
    document = document_of(DATA, header=["head"], before={"b": ["about b"]})
    return document, dump(document)


def _changed(text: str, old: str, new: str) -> str:
    assert text.count(old) == 1, (old, text)
    return text.replace(old, new)


@pytest.mark.parametrize("pure", PARSERS)
def test_the_text_written_is_proved_and_its_data_is_the_documents(pure: bool) -> None:
    document, text = _doc()
    data, problems = reread_emitted(document, text, pure=pure)
    assert problems == [] and data is document.data
    assert _same(YAML(typ="safe", pure=pure).load(text), document.data)


CHANGES = [
    # (what, old, new, the message)
    ("a value", "ttl: 5\n", "ttl: 6\n", "model 'b'"),
    ("a string made plain", 'word: "true"\n', "word: true\n", "the document"),
    ("a boolean made a string", "flag: true\n", 'flag: "true"\n', "the document"),
    ("an int made a boolean", "ttl: 0\n", "ttl: false\n", "model 'a'"),
    ("an int made a float", "ttl: 0\n", "ttl: 0.0\n", "model 'a'"),
    ("a float made an int", "ratio: 1.5\n", "ratio: 1\n", "the document"),
    ("null made a string", "nothing: null\n", "nothing: ''\n", "the document"),
    ("a key dropped", "    ttl: 0\n", "", "model 'a'"),
    ("a key added", "    ttl: 0\n", "    ttl: 0\n    extra: 1\n", "model 'a'"),
    ("an item dropped", "    - Y=2\n", "", "model 'a'"),
    ("an item added", "    - Y=2\n", "    - Y=2\n    - Z=3\n", "model 'a'"),
    ("keys reordered", "    ttl: 0\n    env:\n", "    env:\n", "the document"),
    ("a tag", "ratio: 1.5\n", "ratio: !!float 1.5\n", "the document"),
    ("a tag on a key", "ratio: 1.5\n", "!!str ratio: 1.5\n", "the document"),
    ("an anchor", "ratio: 1.5\n", "ratio: &r 1.5\n", "the document"),
    ("a merge key", "  b:\n", "  b:\n    <<: {}\n", "the document"),
    ("a directive", "healthCheckTimeout", "%YAML 1.2\n---\nhealthCheckTimeout", "the document"),
    (
        "a second document",
        "    ttl: 5\n",
        "    ttl: 5\n---\nx: 1\n",
        None,
    ),
    ("a swallowed line", "# head\n", "# head ", "the document"),
    ("a swallowed key", "  # about b\n", "  # about b", None),
]


def _rewritten(text: str, what: str, old: str, new: str) -> str:
    if what == "keys reordered":  # ttl after env: the same mapping to a loader, not as written
        return _changed(
            text,
            "    ttl: 0\n    env:\n    - X=1\n    - Y=2\n",
            "    env:\n    - X=1\n    - Y=2\n    ttl: 0\n",
        )
    return _changed(text, old, new)


@pytest.mark.parametrize("pure", PARSERS)
@pytest.mark.parametrize(("what", "old", "new", "where"), CHANGES, ids=[c[0] for c in CHANGES])
def test_a_text_that_says_anything_else_is_refused(
    pure: bool, what: str, old: str, new: str, where: str | None
) -> None:
    document, text = _doc()
    changed = _rewritten(text, what, old, new)
    assert not _reads_back(changed, document.data, pure=pure)
    data, problems = reread_emitted(document, changed, pure=pure)
    if where is None:  # the loader itself refuses it
        assert data is None and problems[0].startswith("it would not be valid YAML ("), problems
    else:
        assert problems == [f"{where} would not read back as written"], (what, problems)


@pytest.mark.parametrize("pure", PARSERS)
def test_an_alias_is_refused_though_it_reads_back_equal(pure: bool) -> None:
    """An alias or anchor reads back as equal data, but the emitter writes none: the text is
    not what was written, and the proof does not follow it."""
    document, text = _doc()
    changed = _changed(
        text,
        "      list:\n      - p\n      - q\n      same:\n      - p\n      - q\n",
        "      list: &l\n      - p\n      - q\n      same: *l\n",
    )
    assert YAML(typ="safe", pure=pure).load(changed) == document.data
    assert reread_emitted(document, changed, pure=pure)[1] == [
        "the document would not read back as written"
    ]


@pytest.mark.parametrize("pure", PARSERS)
def test_a_repeated_key_is_refused_as_the_loader_refuses_it(pure: bool) -> None:
    document, text = _doc()
    for old, new in (
        ("    ttl: 5\n", "    ttl: 5\n    ttl: 5\n"),
        ("ratio: 1.5\n", "ratio: 1.5\nratio: 1.5\n"),
    ):
        changed = _changed(text, old, new)
        assert not _reads_back(changed, document.data, pure=pure)
        data, problems = reread_emitted(document, changed, pure=pure)
        assert data is None and problems[0].startswith("it would not be valid YAML ("), problems
        assert "duplicate key" in problems[0]


@pytest.mark.parametrize("pure", PARSERS)
def test_not_a_mapping_and_no_document_are_refused(pure: bool) -> None:
    document, _ = _doc()
    for text in ("", "# only a comment\n", "- 1\n", "x\n", "[]\n"):
        assert not _reads_back(text, document.data, pure=pure)
        assert reread_emitted(document, text, pure=pure) == (
            None,
            ["model 'a' would not read back as written"],
        )


@pytest.mark.parametrize("pure", PARSERS)
def test_each_plain_scalar_is_read_as_the_loader_reads_it(pure: bool) -> None:
    """Words and numbers in the forms YAML 1.2 reads as something else than a string, as
    values of a mapping meant to hold those strings: each refused, each read right."""
    words = ["1_000", "0o17", "0x1F", ".inf", ".NaN", "~", "null", "True", "2001-12-14", "1e3"]
    meant = {f"k{i}": w for i, w in enumerate(words)}
    plain = "".join(f"k{i}: {w}\n" for i, w in enumerate(words))
    loaded = YAML(typ="safe", pure=pure).load(plain)
    for i, w in enumerate(words):
        assert not isinstance(loaded[f"k{i}"], str), w
        assert not _reads_back(f"k{i}: {w}\n", {f"k{i}": w}, pure=pure), w
        value = loaded[f"k{i}"]
        if value == value:  # NaN is equal to nothing, itself included: refused, as before
            assert _reads_back(f"k{i}: {w}\n", {f"k{i}": value}, pure=pure), w
    assert _reads_back("".join(f'k{i}: "{w}"\n' for i, w in enumerate(words)), meant, pure=pure)


def test_round_trip_scalars_are_written_and_proved_as_plain_ones() -> None:
    """A passthrough value from the round-trip loader (``ScalarFloat``, ``HexInt``, an aware
    ``TimeStamp``) is written as its value and read back as a plain float, int or datetime:
    the document's data says so."""
    loaded = YAML().load("f: 1.5\nh: 0x10\nt: 2024-01-02 03:04:05+02:00\nd: 2024-01-02\n")
    assert type(loaded["t"]) is not datetime.datetime  # ruamel's own subclass
    document = document_of({**loaded, "models": {}})
    types = [type(v) for v in document.data.values()]
    assert types == [float, int, datetime.datetime, datetime.date, dict]
    assert reread_emitted(document, dump(document)) == (document.data, [])


def test_a_date_in_the_passthrough_is_hashed_not_refused() -> None:
    """The inputs' hash takes a value JSON has no type for (a YAML date) as its type and
    value: no internal error, and not the hash of the same text as a string."""
    from backendmgr.config.models import Settings
    from backendmgr.emit.regen import inputs_hash

    day = Settings(llama_swap={"t": datetime.date(2024, 1, 2)})
    text = Settings(llama_swap={"t": "2024-01-02"})
    assert inputs_hash(day, [], [], None) != inputs_hash(text, [], [], None)
    assert inputs_hash(day, [], [], None) == inputs_hash(day, [], [], None)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(min_value=0, max_value=10**6),
            st.integers(min_value=0, max_value=3),
            st.sampled_from(
                [
                    "",
                    " ",
                    "\n",
                    "-",
                    ":",
                    "#",
                    "&a",
                    "*a",
                    "!",
                    '"',
                    "'",
                    "0",
                    "x",
                    "true",
                    "  ",
                    "<<",
                    "[",
                    "{",
                    "}",
                    "|",
                    "%",
                    "---",
                ]
            ),
        ),
        min_size=1,
        max_size=3,
    )
)
def test_what_the_proof_accepts_reads_back_as_the_data(edits: list[tuple[int, int, str]]) -> None:
    """Soundness, by random edits of a written text: whatever the event walk accepts, the
    loader (both parsers) reads back as exactly the data, types included."""
    document, text = _doc()
    for at, cut, put in edits:
        at %= len(text) + 1
        text = text[:at] + put + text[at + cut :]
    for pure in (False, True):
        if _reads_back(text, document.data, pure=pure):
            assert _same(YAML(typ="safe", pure=pure).load(text), document.data), text


def test_without_the_c_extension_the_pure_parser_proves_the_text() -> None:
    """Where ``ruamel.yaml.clib`` does not install, the proof walks ruamel's pure parser's
    events, and says what it says here, for the text written and for each change."""
    document, text = _doc()
    texts = [text] + [_rewritten(text, *c[:3]) for c in CHANGES]
    code = (
        "import json\n"
        "from ruamel.yaml import YAML\n"
        "from ruamel.yaml.parser import Parser\n"
        "assert YAML(typ='safe').Parser is Parser\n"
        "from tests.emit.test_reread import _doc\n"
        "from backendmgr.emit.verify import reread_emitted\n"
        "document, _ = _doc()\n"
        "print(json.dumps([reread_emitted(document, t)[1] for t in json.loads(sys.stdin.read())]))"
    )
    said = without_clib(code, texts)
    assert said[0] == []
    # the same refusals (a syntax error's snippet is the pure parser's own)
    assert [_gist(s) for s in said] == [_gist(reread_emitted(document, t)[1]) for t in texts]


def _gist(problems: list[str]) -> list[str]:
    return [p.split(" (")[0] for p in problems]
