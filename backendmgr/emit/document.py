"""The llama-swap config as text (SPEC §12.1): header, passthrough keys, models in id order.

Written by libyaml's emitter (``ruamel.yaml.clib``'s ``CEmitter``; where that C extension is
not installed, ruamel's pure ``Emitter``, a port of the same emitter, fed the same events and
writing the same text) from events made here, so no value is ever spliced as YAML text (a
file name can never add a key). libyaml writes no comments, so the text is written in
pieces, each a whole YAML document the emitter wrote: the top-level keys as one mapping, then
each model as ``{models: {id: body}}``. Its first line, ``models:`` (the key, plain, and a
line break: its value is a non-empty block mapping; checked), is kept once, before the first
model; the rest of each piece is the model's key and body indented two, which continues that
mapping. No text is made by hand but whole comment lines between pieces (which row, why,
sizing notes, skips), each forced onto a single printable line, and no piece ends inside a
value: each is a block mapping, ended by its last line break. The joined text is re-read
before it is written (:func:`.verify.reread_emitted`): if it does not read back equal to
the document's data, nothing is written.

One quoting rule, decided from what Go's yaml.v3 (llama-swap's parser) reads, not from what
the emitter would pick: every string key and value is plain only in a small safe set (a
letter, ``_`` or ``/`` first, then letters, digits and ``_./=+-``, and no YAML 1.1 boolean or
null word), else double-quoted with escapes; a model's ``cmd`` of printable-ASCII lines is a
literal block. A string holding ``${env.`` is always double-quoted: llama-swap pastes the
variable into the raw text escaped for exactly that style. Whether non-ASCII is written as
itself is an emitter setting, so it is decided per piece: a piece (the top-level keys, or one
model entry) holding an invisible or direction-changing character (U+202E, U+200B …) anywhere,
or one beyond U+FFFF (which libyaml always escapes and the pure emitter would not), has all
its non-ASCII escaped. Sequences are block sequences, written under their key without indent.
"""

from __future__ import annotations

import datetime
import io
import json
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..immutable import frozen
from .entries import HASH_PREFIX, plain_safe, screened_body, single_line
from .plan import Entry, Skip

__all__ = ["Document", "build_document", "document_of", "dump"]

_HIDDEN = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})
_WIDTH = 1 << 30  # never fold a long path or command line
_MODELS_LINE = "models:\n"
_MODEL_COMMENT = "  # "  # a comment line above a model key, at its indent


class _Piece:
    """One whole YAML document of the text: the comment lines above it (each ending in its
    line break), its events, whether its non-ASCII is escaped, and which model it writes."""

    __slots__ = ("comments", "escape", "events", "head", "model")

    def __init__(
        self,
        comments: tuple[str, ...],
        events: list[Any],
        escape: bool,
        model: int | None = None,
        head: tuple[str, ...] = (),
    ) -> None:
        self.comments = comments
        self.events = events
        self.escape = escape
        self.model = model  # the how-manieth model the piece writes, if it writes one
        self.head = head  # the header, when the first model's piece is the first piece


@frozen
class Document:
    """The config as llama-swap must read it (``data``: plain dicts, lists, strings, numbers,
    booleans, string keys, ``models`` last), and the pieces :func:`dump` writes it as; made
    by :func:`document_of`, one walk giving both."""

    data: dict[str, Any]
    pieces: tuple[_Piece, ...]
    after: tuple[str, ...] = ()
    # ``data`` less the models whose bodies a plan's screen already passed through llama-swap's
    # macro pass with these very macros: what the check before the write still runs it on
    # (None: all of ``data``)
    unscreened: dict[str, Any] | None = None


def _hidden(ch: str) -> bool:
    """Whether ``ch`` (not ASCII) makes its piece all-ASCII: Unicode's tables are loaded by
    the first non-ASCII character, which most documents never hold."""
    import unicodedata

    return ch > "\uffff" or unicodedata.category(ch) in _HIDDEN


class _Walk:
    """Events for the pieces of one document, and the plain data they write (keys made
    strings, tuples lists), which the re-read compares against. Events are made once per
    distinct scalar: the emitters only read them."""

    def __init__(self) -> None:
        from ruamel.yaml import events

        self.ev = events
        self.out: list[Any] = []
        self.escape = False  # the piece holds a character that makes it all-ASCII
        self._scalars: dict[tuple[str, str | None], tuple[Any, bool]] = {}
        self._strings: dict[str, tuple[Any, bool]] = {}  # by the one quoting rule
        self.map_start = events.MappingStartEvent(None, None, True, flow_style=False)
        self.map_end = events.MappingEndEvent()
        self.seq_start = events.SequenceStartEvent(None, None, True, flow_style=False)
        self.seq_end = events.SequenceEndEvent()

    def piece(
        self, comments: tuple[str, ...], model: int | None = None, head: tuple[str, ...] = ()
    ) -> _Piece:
        """The events since the last piece as one, between a mapping's start and end."""
        piece = _Piece(
            comments, [self.map_start, *self.out, self.map_end], self.escape, model, head
        )
        self.out = []
        self.escape = False
        return piece

    def _event(self, text: str, style: str | None) -> tuple[Any, bool]:
        """The scalar's event, and whether it holds a character that makes the piece ASCII."""
        hidden = not text.isascii() and any(_hidden(ch) for ch in text)
        return self.ev.ScalarEvent(None, None, (True, True), text, style=style), hidden

    def scalar(self, text: str, style: str | None) -> None:
        known = self._scalars.get((text, style))
        if known is None:
            known = self._scalars[text, style] = self._event(text, style)
        self.out.append(known[0])
        self.escape = self.escape or known[1]

    def string(self, text: str) -> str:
        """A string by the one quoting rule (its event made once per distinct string)."""
        known = self._strings.get(text)
        if known is None:
            style = None if plain_safe(text) else '"'
            known = self._strings[text] = self._event(text, style)
        self.out.append(known[0])
        if known[1]:
            self.escape = True
        return text

    def value(self, value: Any) -> Any:
        """Any value of the data, block style; returns it as the re-read must give it."""
        kind = type(value)  # the plain types an entry holds first, by their exact type
        if kind is str:
            return self.string(value)
        if kind is dict:
            return self.mapping(value)
        if kind is int:
            self.scalar(int.__repr__(value), None)
            return value
        if kind is bool:
            self.scalar("true" if value else "false", None)
            return value
        if isinstance(value, str):
            return self.string(str.__str__(value))
        if isinstance(value, dict):
            return self.mapping(value)
        if isinstance(value, list | tuple):
            self.out.append(self.seq_start)
            items = [self.value(v) for v in value]
            self.out.append(self.seq_end)
            return items
        self.scalar(*_scalar_text(value))
        if isinstance(value, int) and not isinstance(value, bool):
            return int.__int__(value)  # a round-trip HexInt reads back as a plain int
        if isinstance(value, float):
            return float.__float__(value)  # and a ScalarFloat as a plain float
        if isinstance(value, datetime.datetime) and type(value) is not datetime.datetime:
            return datetime.datetime.fromisoformat(value.isoformat())  # and a TimeStamp
        return value

    def mapping(self, value: Mapping[Any, Any], *, literal_cmd: bool = False) -> dict[str, Any]:
        """A mapping, block style; with ``literal_cmd`` (a model's body), its ``cmd`` of
        printable ASCII lines as a literal block (readable), anything else by the one rule."""
        out, strings = self.out, self._strings
        out.append(self.map_start)
        plain: dict[str, Any] = {}
        for key, item in value.items():
            name = str(key)  # the key's event before the value's; a known plain one inline
            known = strings.get(name)
            if known is None or known[1]:
                self.string(name)
            else:
                out.append(known[0])
            if type(item) is str and not (literal_cmd and name == "cmd"):
                known = strings.get(item)  # :meth:`string`, inline for most values
                if known is None or known[1]:
                    self.string(item)
                else:
                    out.append(known[0])
                plain[name] = item
            elif literal_cmd and name == "cmd" and _literal(item):
                plain[name] = str.__str__(item)
                self.scalar(plain[name], "|")
            else:
                plain[name] = self.value(item)
        out.append(self.map_end)
        return plain


def _literal(value: Any) -> bool:
    """Whether ``value`` is written as a literal block: lines of printable ASCII (which
    ``str.isprintable`` says of exactly U+0020 to U+007E), none empty, none with a space at
    either end, and no ``${env.``."""
    if not isinstance(value, str) or not value.isascii() or "${env." in value:
        return False
    for line in value.split("\n"):
        if not line or line[0] == " " or line[-1] == " " or not line.isprintable():
            return False
    return True


def _scalar_text(value: Any) -> tuple[str, str | None]:
    """A non-string scalar as YAML 1.2 and 1.1 read it back (as ruamel's representer writes
    it); anything else as its text, double-quoted, which the re-read then refuses."""
    if value is None:
        return "null", None
    if isinstance(value, bool):
        return ("true" if value else "false"), None
    if isinstance(value, int):
        return int.__repr__(value), None
    if isinstance(value, float):
        if value != value:
            return ".nan", None
        if value in (math.inf, -math.inf):
            return ("-.inf" if value < 0 else ".inf"), None
        text = float.__repr__(value).lower()
        return (text if "." in text else text.replace("e", ".0e", 1)), None
    if isinstance(value, datetime.datetime):
        return value.isoformat(" "), None
    if isinstance(value, datetime.date):
        return value.isoformat(), None
    return str(value), '"'


def _lines(prefix: str, comments: Sequence[str]) -> tuple[str, ...]:
    return tuple(f"{prefix}{single_line(c)}\n" for c in comments)


def document_of(
    data: Mapping[Any, Any],
    *,
    header: Sequence[str] = (),
    before: Mapping[str, Sequence[str]] | None = None,
    after: Sequence[str] = (),
    screened: frozenset[str] = frozenset(),
) -> Document:
    """``data`` (a mapping; its ``models`` a mapping of model bodies) as a document, with
    comment lines: ``header`` at the top, ``before[id]`` above a model's key, ``after``
    below the last model. Every comment is made one printable line. ``screened``: the ids
    of the models a plan's screen passed (:attr:`Document.unscreened` leaves them out)."""
    walk = _Walk()
    plain: dict[str, Any] = {}
    for key, value in data.items():
        if key != "models":
            name = walk.string(str(key))  # the key's events before the value's
            plain[name] = walk.value(value)
    head = _lines("# ", header)  # the header: above the first piece
    pieces: list[_Piece] = []
    if plain:
        pieces.append(walk.piece(head))
        head = ()
    models = data.get("models", {})
    if not isinstance(models, dict) or not models:
        walk.string("models")
        plain["models"] = walk.value(models)
        pieces.append(walk.piece(head))
    else:
        written: dict[str, Any] = {}
        plain["models"] = written
        for n, (model_id, body) in enumerate(models.items()):
            walk.string("models")
            walk.out.append(walk.map_start)
            name = walk.string(str(model_id))
            written[name] = (
                walk.mapping(body, literal_cmd=True) if isinstance(body, dict) else walk.value(body)
            )
            walk.out.append(walk.map_end)
            comments = _lines(_MODEL_COMMENT, (before or {}).get(model_id, ()))
            pieces.append(walk.piece(comments, n, head if n == 0 else ()))
    unscreened = None
    if screened and isinstance(plain["models"], dict):
        left = {k: v for k, v in plain["models"].items() if k not in screened}
        unscreened = {**plain, "models": left}
    return Document(plain, tuple(pieces), _lines(_MODEL_COMMENT, after), unscreened)


def _pure_emitter() -> Callable[..., Any]:
    """ruamel's pure ``Emitter``, standing alone, without the ``YAML`` object and serializer
    it is made for."""
    from ruamel.yaml.emitter import Emitter

    class PureEmitter(Emitter):
        use_version = (1, 2)  # asked of the serializer (itself, alone) for "?" or ":" first

        def choose_scalar_style(self) -> Any:
            # what ruamel's returns for "…", before it looks for a tag object on an empty
            # string that only its serializer makes
            return '"' if self.event.style == '"' else super().choose_scalar_style()

        def analyze_scalar(self, scalar: Any) -> Any:
            analysis = super().analyze_scalar(scalar)
            if "\r" in scalar:  # a line break to libyaml, which writes such a key as "? key"
                analysis.multiline = True
            return analysis

    return PureEmitter


def _emitter() -> Callable[..., Any]:
    """libyaml's emitter where ``ruamel.yaml.clib`` is installed, else ruamel's port of it."""
    try:
        from _ruamel_yaml import CEmitter  # type: ignore[import-not-found]
    except ImportError:
        return _pure_emitter()
    return CEmitter  # type: ignore[no-any-return]


def _frame() -> tuple[Any, Any, Any, Any]:
    """The events around every piece's mapping: a stream of one implicit document. Made once
    per text, as the walk makes each scalar's once: the emitters only read events."""
    from ruamel.yaml import events as ev

    return (
        ev.StreamStartEvent(encoding="utf-8"),
        ev.DocumentStartEvent(explicit=False),
        ev.DocumentEndEvent(explicit=False),
        ev.StreamEndEvent(),
    )


def _emit(piece: _Piece, emitter: Callable[..., Any], frame: tuple[Any, Any, Any, Any]) -> str:
    """One piece as a whole YAML document (its mapping, in a stream of its own)."""
    stream_start, document_start, document_end, stream_end = frame
    out = io.StringIO()
    writer = emitter(out, indent=2, width=_WIDTH, allow_unicode=not piece.escape)
    writer.emit(stream_start)
    writer.emit(document_start)
    for event in piece.events:
        writer.emit(event)
    writer.emit(document_end)
    writer.emit(stream_end)
    return out.getvalue()


def dump(document: Document, *, pure: bool = False) -> str:
    """The document's YAML text, every key and scalar written by the emitter, comments as
    whole lines between its pieces (see above); ``pure``: ruamel's emitter even where
    libyaml's is installed (for the test that both write the same text)."""
    emitter = _pure_emitter() if pure else _emitter()
    frame = _frame()
    parts: list[str] = []
    for piece in document.pieces:
        text = _emit(piece, emitter, frame)
        if piece.model is not None:
            # the emitter wrote the key `models` (plain) and, its value being a non-empty
            # block mapping, a line break: the rest is that mapping's one entry, the model,
            # indented two; the first model's piece keeps the line, the others continue
            # the mapping it began, each after its comment lines
            if not text.startswith(_MODELS_LINE):
                raise ValueError(f"the emitter began a model with {text[:20]!r}")
            text = text[len(_MODELS_LINE) :]
            if piece.model == 0:
                parts += (*piece.head, _MODELS_LINE)
        parts += piece.comments
        parts.append(text)
    parts += document.after
    return "".join(parts)


def _skip_lines(skip: Skip) -> list[str]:
    return [
        f"SKIPPED {single_line(json.dumps(skip.id))}: {single_line(skip.reason)}",
        *(f"NOTE {single_line(n)}" for n in skip.notes),
    ]


def build_document(
    *,
    version: str,
    inputs_hash: str,
    health_check_timeout: int,
    passthrough: dict[str, Any],
    entries: Sequence[Entry],
    skipped: Sequence[Skip],
) -> Document:
    """The document: its data, comments and pieces; checkable before it is written."""
    header = (
        f"Generated by backendmgr {single_line(version)}. Do not edit: backendmgr "
        "rewrites this file;",
        "change the backendmgr config instead (backendmgr set / pin / default).",
        f"{HASH_PREFIX[2:]}{single_line(inputs_hash)}",
    )
    data: dict[str, Any] = {"healthCheckTimeout": health_check_timeout}
    for key, value in passthrough.items():
        if key != "models":
            data[str(key)] = value
    models: dict[str, Any] = {}
    data["models"] = models
    before: dict[str, tuple[str, ...]] = {}
    items: list[tuple[str, Entry | Skip]] = [(e.model.id, e) for e in entries]
    items += [(s.id, s) for s in skipped]
    items.sort(key=lambda pair: pair[0])
    pending: list[str] = []  # comment lines waiting for the next model key
    passed: set[str] = set()  # the models a plan's screen checked in these very bodies
    for model_id, item in items:
        if isinstance(item, Skip):
            pending += _skip_lines(item)
            continue
        pending += [item.comment, *(f"NOTE {n}" for n in item.notes)]
        body, passes = screened_body(item, passthrough)
        models[model_id] = body
        if passes:
            passed.add(model_id)
        else:  # an id given twice is checked as the body it ends with
            passed.discard(model_id)
        before[model_id] = tuple(pending)
        pending = []
    return document_of(
        data, header=header, before=before, after=pending, screened=frozenset(passed)
    )
