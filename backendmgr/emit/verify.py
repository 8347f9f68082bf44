"""Does a written llama-swap config say what the plan says? (SPEC §12.1, `doctor`, `--check`)

Pure: the file's text and the plan in, a list of problems out. The text is parsed (never
matched as text), checked against the shape llama-swap's JSON schema gives the keys
backendmgr writes, then against the plan: the same model ids, and each ``cmd`` exactly what
the plan renders. A model no plan asked for (a name that smuggled in a key, a hand edit) is a
problem, never "ok".
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from ruamel.yaml.error import YAMLError
from ruamel.yaml.parser import Parser

from .._ruamel import safe_yaml
from .entries import entry_cmd, entry_env, single_line
from .macros import load_problems
from .plan import Entry
from .schema import string_field_problems

if TYPE_CHECKING:
    from .document import Document

__all__ = ["CAPABILITY_KEYS", "check_config", "check_emitted", "check_shape", "reread_emitted"]

# the schema's env item pattern, ^[A-Z_][A-Z0-9_]*=.*$, where "." matches no line break;
# compiled by re (and kept in its cache) at the first entry with an env: most have none
ENV_ITEM = "[A-Z_][A-Z0-9_]*=[^\n\r\u2028\u2029]*"

# llama-swap's schema leaves unknown model and top-level keys open, but closes capabilities.
CAPABILITY_KEYS = frozenset({"in", "out", "tools", "reranker", "context"})
MODALITIES = frozenset({"text", "audio", "image"})
_MAX_REPORTED = 5


def _is_int(value: Any, minimum: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= minimum


def _model_shape(model_id: Any, body: Any) -> list[str]:
    name = single_line(repr(model_id))
    if not isinstance(model_id, str) or not model_id:
        return [f"model key {name} is not a non-empty string"]
    if not isinstance(body, dict):
        return [f"model {name} is not a mapping"]
    problems: list[str] = []
    cmd = body.get("cmd")
    if not isinstance(cmd, str) or not cmd.strip():
        problems.append(f"model {name} has no cmd")
    if "ttl" in body and not _is_int(body["ttl"], -1):
        problems.append(f"model {name}: ttl is not an integer >= -1")
    if "unlisted" in body and not isinstance(body["unlisted"], bool):
        problems.append(f"model {name}: unlisted is not a boolean")
    if "metadata" in body and not isinstance(body["metadata"], dict):
        problems.append(f"model {name}: metadata is not a mapping")
    problems += string_field_problems(body, f"model {name}")
    env = body.get("env", [])
    if not isinstance(env, list):
        problems.append(f"model {name}: env is not a list")
    else:
        problems += [
            f"model {name}: env item {single_line(repr(w))[:80]} is not KEY=VALUE on one line "
            "with KEY in capitals, digits and _"
            for w in env
            if not (isinstance(w, str) and re.fullmatch(ENV_ITEM, w))
        ]
    aliases = body.get("aliases", [])
    if not isinstance(aliases, list) or not all(isinstance(a, str) and a for a in aliases):
        problems.append(f"model {name}: aliases is not a list of names")
    caps = body.get("capabilities", {})
    if not isinstance(caps, dict):
        return [*problems, f"model {name}: capabilities is not a mapping"]
    for key, value in caps.items():
        if key not in CAPABILITY_KEYS:
            problems.append(f"model {name}: unknown capability {single_line(repr(key))}")
        elif key in ("in", "out") and not (
            isinstance(value, list) and value and all(v in MODALITIES for v in value)
        ):
            problems.append(f"model {name}: capabilities.{key} is not a list of modalities")
        elif key in ("tools", "reranker") and not isinstance(value, bool):
            problems.append(f"model {name}: capabilities.{key} is not a boolean")
        elif key == "context" and not _is_int(value, 0):
            problems.append(f"model {name}: capabilities.context is not an integer >= 0")
    return problems


def check_shape(data: Any, unscreened: dict[str, Any] | None = None) -> list[str]:
    """What llama-swap needs of the document, from its schema, for what backendmgr writes
    (``unscreened``: what of ``data`` llama-swap's macro pass still has to read,
    :attr:`.document.Document.unscreened`; all of it by default)."""
    if not isinstance(data, dict):
        return ["the document is not a mapping"]
    problems = [
        f"key {single_line(repr(k))} is not a string" for k in data if not isinstance(k, str)
    ]
    if "healthCheckTimeout" in data and not _is_int(data["healthCheckTimeout"], 15):
        problems.append("healthCheckTimeout is not an integer >= 15")
    models = data.get("models")
    if not isinstance(models, dict):
        return [*problems, "it has no models mapping"]
    owner: dict[Any, Any] = {}
    for model_id, body in models.items():
        problems += _model_shape(model_id, body)
        aliases = body.get("aliases") if isinstance(body, dict) else None
        for alias in aliases if isinstance(aliases, list) else []:
            if isinstance(alias, str) and owner.setdefault(alias, model_id) != model_id:
                problems.append(
                    f"model {single_line(repr(model_id))}: alias {single_line(repr(alias))} "
                    f"is model {single_line(repr(owner[alias]))}'s too"
                )
    problems += macro_problems(data if unscreened is None else unscreened)
    return problems + [
        f"model {single_line(repr(m))}: its id holds ${{env.…}}, which llama-swap would rewrite"
        for m in models
        if "${env." in str(m)
    ]


def macro_problems(data: dict[Any, Any]) -> list[str]:
    """What llama-swap's macro pass refuses (:func:`.macros.load_problems`), each naming the
    model and the value."""
    top, per_model = load_problems({str(k): v for k, v in data.items()})
    problems = [single_line(p) for p in top]
    problems += [f"model {single_line(repr(m))}: {single_line(p)}" for m, p in per_model.items()]
    return problems


def check_emitted(document: Document, text: str) -> list[str]:
    """Before a file is replaced: the text reads back as exactly the data meant, has the
    shape llama-swap needs and passes its macro checks. Empty when it may be written."""
    return reread_emitted(document, text)[1]


def reread_emitted(
    document: Document, text: str, *, pure: bool = False
) -> tuple[dict[str, Any] | None, list[str]]:
    """:func:`check_emitted`, and the data the text reads back as (``None`` when it is no
    mapping): on success the document's own data, which the text was proved to say. What
    makes writing the document in pieces (:mod:`.document`) safe: text that does not read
    back equal to the document's data, key for key and value for value, is never written.

    The proof walks the parser's events (libyaml's where ``ruamel.yaml.clib`` is installed,
    else ruamel's pure parser; ``pure``: that one anyway) against the data
    (:func:`_reads_back`): no tree is built. Only a refused text is loaded, to say where."""
    meant = document.data
    if _reads_back(text, meant, pure=pure):
        return meant, check_shape(meant, document.unscreened)
    try:
        data = _safe(pure).load(text)
    except (YAMLError, ValueError, RecursionError) as exc:
        return None, [f"it would not be valid YAML ({single_line(str(exc))[:200]})"]
    mapping = data if isinstance(data, dict) else None
    read = mapping.get("models") if mapping is not None else None
    read = read if isinstance(read, dict) else {}
    models = meant.get("models", {})
    changed = [k for k in models if not _same(read.get(k, _REFUSED), models[k])]
    where = f"model {single_line(repr(changed[0]))}" if changed else "the document"
    return mapping, [f"{where} would not read back as written"]


def _safe(pure: bool) -> Any:
    """The loader of :func:`reread_emitted`: ``safe_yaml()``, or its pure form."""
    from ruamel.yaml import YAML

    return YAML(typ="safe", pure=True) if pure else safe_yaml()


_REFUSED = object()  # what a scalar the check refuses reads as: equal to no value
_END = object()  # what is left of a collection when nothing is
_SCALAR_TAGS = frozenset(
    f"tag:yaml.org,2002:{t}" for t in ("str", "int", "float", "bool", "null", "timestamp")
)


def _same(read: Any, meant: Any) -> bool:
    """Equal and of the same types throughout (``True`` is not ``1``, ``1.0`` not ``1``)."""
    if type(read) is not type(meant):
        return False
    if isinstance(read, dict):
        return len(read) == len(meant) and all(
            k in meant and _same(v, meant[k]) for k, v in read.items()
        )
    if isinstance(read, list):
        return len(read) == len(meant) and all(map(_same, read, meant))
    return bool(read == meant)


class _Plain:
    """Plain scalars as the safe loader reads them: the tag from ruamel's resolver, the value
    from its constructor (a tag the emitter never makes reads as :data:`_REFUSED`), each
    distinct text once per check."""

    def __init__(self, yaml: Any) -> None:
        from ruamel.yaml.nodes import ScalarNode

        self.node = ScalarNode
        self.resolve = yaml.resolver.resolve
        self.constructor = yaml.constructor
        self.known: dict[str, Any] = {}

    def __call__(self, text: str) -> Any:
        """The value of the plain scalar ``text``, kept in :attr:`known`."""
        tag = self.resolve(self.node, text, (True, False))
        if str(tag) not in _SCALAR_TAGS:
            value = _REFUSED  # a merge key, "=", and the like
        else:
            value = self.constructor.construct_object(self.node(tag, text))
        self.known[text] = value
        return value


def _reads_back(text: str, meant: dict[str, Any], *, pure: bool = False) -> bool:
    """Whether ``text`` is one YAML document that the safe loader reads as exactly ``meant``:
    its mappings, sequences, keys (in order) and scalars, each scalar of the same type and
    value (a plain one resolved and constructed as the loader does, a quoted or block one a
    string), with no anchor, alias, tag or directive, each mapping with exactly the keys
    meant. Walked over the parser's events, which are flat: depth costs no recursion."""
    from ruamel.yaml import events as ev

    yaml = _safe(pure)
    if yaml.Parser is Parser:
        next_event = iter(yaml.parse(text)).__next__
    else:  # libyaml's (ruamel's parse() would wire it to the pure scanner)
        next_event = yaml.Parser(text).get_event
    plain = _Plain(yaml)
    known = plain.known  # each distinct plain scalar, as read
    scalar, alias = ev.ScalarEvent, ev.AliasEvent
    mapping, sequence = ev.MappingStartEvent, ev.SequenceStartEvent
    mapping_end, sequence_end = ev.MappingEndEvent, ev.SequenceEndEvent
    end = _END
    try:
        if type(next_event()) is not ev.StreamStartEvent:
            return False
        start = next_event()
        if type(start) is not ev.DocumentStartEvent or start.version or start.tags:
            return False  # a directive: the emitter writes none, and the parsers differ on it
        root = next_event()
        if type(root) is not mapping or type(meant) is not dict:
            return False  # the document is no mapping
        if root.anchor is not None or root.ctag is not None:
            return False
        # per open collection: mapping?, what is left of it; the innermost also in locals
        is_mapping, left = True, iter(meant.items())
        stack: list[tuple[bool, Iterator[Any]]] = [(is_mapping, left)]
        while True:
            event = next_event()
            kind = type(event)
            if kind is mapping_end or kind is sequence_end:
                if next(left, end) is not end:
                    return False  # a key or an item missing
                stack.pop()
                if not stack:
                    break
                is_mapping, left = stack[-1]
                continue
            if is_mapping:  # the key, then its value
                item: Any = next(left, end)
                if item is end or kind is not scalar or event.ctag is not None:
                    return False  # an extra key, or a key that is no string
                key = event.value
                if event.implicit[0]:
                    key = known.get(key, end)
                    key = plain(event.value) if key is end else key
                if type(key) is not str or key != item[0] or event.anchor is not None:
                    return False
                want: Any = item[1]
                event = next_event()
                kind = type(event)
            else:
                want = next(left, end)
                if want is end:
                    return False  # an extra item
            if kind is alias or event.anchor is not None or event.ctag is not None:
                return False
            if kind is scalar:
                value = event.value
                if event.implicit[0]:
                    value = known.get(value, end)
                    value = plain(event.value) if value is end else value
                if type(value) is not type(want) or value != want:
                    return False
            elif kind is mapping and type(want) is dict:
                is_mapping, left = True, iter(want.items())
                stack.append((is_mapping, left))
            elif kind is sequence and type(want) is list:
                is_mapping, left = False, iter(want)
                stack.append((is_mapping, left))
            else:
                return False
        return type(next_event()) is ev.DocumentEndEvent and type(next_event()) is ev.StreamEndEvent
    except (YAMLError, ValueError, RecursionError, StopIteration):
        return False


def _summary(what: str, ids: Sequence[Any]) -> str:
    shown = ", ".join(single_line(repr(i)) for i in sorted(ids, key=str)[:_MAX_REPORTED])
    more = f" and {len(ids) - _MAX_REPORTED} more" if len(ids) > _MAX_REPORTED else ""
    return f"{what}: {shown}{more}"


def check_config(
    text: str, entries: Sequence[Entry] | None, passthrough: dict[str, Any] | None = None
) -> list[str]:
    """Problems with ``text`` as a llama-swap config; with ``entries``, also against the plan
    (``passthrough``: the global one, whose macros an ``extra_args`` may name)."""
    from .._yaml import check_yaml
    from ..errors import ConfigError

    try:
        check_yaml(text, "it")  # a hand-edited file may nest or alias without bound
        data = safe_yaml().load(text)
    except ConfigError as exc:
        return [single_line(str(exc))]
    except (YAMLError, ValueError, RecursionError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return [f"it is not valid YAML ({single_line(first)})"]
    problems = check_shape(data)
    if problems or entries is None:
        return problems
    written: dict[Any, Any] = data["models"]
    planned = {e.model.id: e for e in entries}
    extra = [k for k in written if k not in planned]
    missing = [k for k in planned if k not in written]
    if extra:
        problems.append(_summary("it holds models the plan does not", extra))
    if missing:
        problems.append(_summary("it lacks models the plan has", missing))
    changed = [
        k
        for k, e in planned.items()
        if k in written and written[k].get("cmd") != entry_cmd(e, passthrough)
    ]
    if changed:
        problems.append(_summary("its cmd differs from the plan for", changed))
    env = [
        k
        for k, e in planned.items()
        if k in written
        and isinstance(written[k], dict)
        and written[k].get("env", []) != entry_env(e)
    ]
    if env:
        problems.append(_summary("its env differs from the plan for", env))
    return problems
