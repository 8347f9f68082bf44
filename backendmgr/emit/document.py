"""The llama-swap config as text (SPEC §12.1): header, passthrough keys, models in id order.

Built as a ruamel.yaml node tree and written by its emitter, so no value is ever spliced as
YAML text (a file name can never add a key); the comments the document carries (which row,
why, sizing notes, skips) are attached through ruamel's comment API, each one forced onto a
single printable line first.

One quoting rule, decided from what Go's yaml.v3 (llama-swap's parser) reads, not from what
ruamel would pick: every string key and value is plain only in a small safe set (a letter,
``_`` or ``/`` first, then letters, digits and ``_./=+-``, and no YAML 1.1 boolean or null
word), else double-quoted with escapes; a double-quoted string holding an invisible or
direction-changing character has all its non-ASCII escaped. A string holding ``${env.`` is
always double-quoted: llama-swap pastes the variable into the raw text escaped for exactly
that style. Sequences are block sequences.
"""

from __future__ import annotations

import io
import json
import re
import unicodedata
from collections.abc import Sequence
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.emitter import RoundTripEmitter
from ruamel.yaml.error import CommentMark
from ruamel.yaml.scalarstring import DoubleQuotedScalarString, LiteralScalarString
from ruamel.yaml.tokens import CommentToken

from .macros import MERGE_KEY, declared, load_problems, shell_line
from .plan import Entry, Skip, render_token

__all__ = [
    "HASH_PREFIX",
    "build_document",
    "dump",
    "entry_body",
    "entry_cmd",
    "entry_env",
    "plain_safe",
    "screen",
    "single_line",
]

HASH_PREFIX = "# inputs: sha256:"
_INDENT = 2  # models are keys of the top-level `models:` mapping


def single_line(text: str) -> str:
    """One printable line: a name from a file must never end a comment and start YAML."""
    return " ".join("".join(ch if ch.isprintable() else "?" for ch in text).split())


_PLAIN = re.compile(r"[A-Za-z_/][A-Za-z0-9_./=+-]*")
_YAML11_WORDS = frozenset({"y", "n", "yes", "no", "on", "off", "true", "false", "null"})
_HIDDEN = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})
_LITERAL_LINE = re.compile(r"[!-~](?:[ -~]*[!-~])?")  # printable ASCII, no edge spaces


def plain_safe(text: str) -> bool:
    """Whether ``text`` reads back as the same string when written plain, by any YAML 1.1
    or 1.2 parser: no indicator, space, number, timestamp, boolean or null look-alike."""
    return bool(_PLAIN.fullmatch(text)) and text.lower() not in _YAML11_WORDS


def _hidden(ch: str) -> bool:
    return unicodedata.category(ch) in _HIDDEN


class _Emitter(RoundTripEmitter):
    """ruamel's emitter, but a double-quoted string with an invisible or direction-changing
    character (U+202E, U+200B …) gets every non-ASCII character escaped."""

    def write_double_quoted(self, text: Any, split: Any = True) -> None:
        saved = self.allow_unicode
        self.allow_unicode = saved and not any(_hidden(ch) for ch in text)
        try:
            super().write_double_quoted(text, False)  # never folded across lines
        finally:
            self.allow_unicode = saved


def _string(text: str) -> str:
    return text if plain_safe(text) else DoubleQuotedScalarString(text)


def _node(value: Any) -> Any:
    """Plain data as ruamel nodes in block style, every string styled by the one rule."""
    if isinstance(value, dict):
        out = CommentedMap()
        for key, item in value.items():
            out[_string(str(key))] = _node(item)
        return out
    if isinstance(value, list | tuple):
        return CommentedSeq(_node(item) for item in value)
    if isinstance(value, str):
        return _string(value)
    return value


def _cmd_node(cmd: Any) -> Any:
    """A ``cmd`` of printable ASCII lines as a literal block (readable); anything else by
    the one rule."""
    if (
        isinstance(cmd, str)
        and "${env." not in cmd
        and all(_LITERAL_LINE.fullmatch(line) for line in cmd.split("\n"))
    ):
        return LiteralScalarString(cmd)
    return _node(cmd)


def _defined(entry: Entry, passthrough: dict[str, Any] | None = None) -> set[str]:
    """The macro names the user's own ``llama_swap`` blocks define for this entry."""
    names = {n for n, _ in declared(entry.passthrough.get("macros"))}
    return names | {n for n, _ in declared((passthrough or {}).get("macros"))}


def entry_cmd(entry: Entry, passthrough: dict[str, Any] | None = None) -> Any:
    """The ``cmd`` an entry gets: the user's passthrough ``cmd`` if set, else one flag group
    per line, each word quoted so a shell-words split gives exactly the argv and a ``${``
    in a path or name is no macro; ``extra_args`` keeps its explicit macros."""
    if "cmd" in entry.passthrough:
        return entry.passthrough["cmd"]
    lines = [" ".join(render_token(t) for t in group) for group in entry.groups if group]
    if entry.extra_args:
        lines.append(shell_line(entry.extra_args, _defined(entry, passthrough)))
    return "\n".join(lines)


def entry_env(entry: Entry) -> list[str]:
    """The ``env`` an entry gets: the user's passthrough ``env`` if set (it replaces ours, as
    every passthrough key does), else the device variables and the model's ``env`` words."""
    theirs = entry.passthrough.get("env")
    return list(theirs) if isinstance(theirs, list) else list(entry.env)


def entry_body(entry: Entry, passthrough: dict[str, Any] | None = None) -> dict[str, Any]:
    """The entry's model mapping as plain data: what llama-swap must read back."""
    body: dict[str, Any] = {"cmd": entry_cmd(entry, passthrough)}
    if entry.env:
        body["env"] = list(entry.env)
    body |= {
        "ttl": entry.ttl,
        "metadata": entry.metadata,
        "capabilities": entry.capabilities,
    }
    if entry.unlisted is not None:
        body["unlisted"] = entry.unlisted
    body.update({k: v for k, v in entry.passthrough.items() if k != "cmd"})
    return body


def _body(entry: Entry, passthrough: dict[str, Any]) -> CommentedMap:
    body = entry_body(entry, passthrough)
    node: CommentedMap = _node(body)
    node["cmd"] = _cmd_node(body["cmd"])
    return node


def screen(entry: Entry, passthrough: dict[str, Any]) -> Entry | Skip:
    """The entry, or a skip when llama-swap would refuse its model: a ``${name}`` no macro
    defines (a file, folder or row named so, in a value that has no escape), or a model id
    its ``${env.NAME}`` pass would rewrite. Only this model is left out; the rest load."""
    model_id = entry.model.id
    problem: str | None = None
    probed = [str(v) for v in entry.metadata.values() if "${" in str(v)]
    if model_id == MERGE_KEY:
        problem = 'its id "<<" is a YAML merge key to llama-swap, which would merge the entry'
    elif "${env." in model_id:
        problem = "its id holds ${env.…}, which llama-swap would replace in the file's text"
    elif probed:  # a build id from a release tag: no escape in metadata, nor any user intent
        problem = f"its metadata {single_line(probed[0])[:80]!r} holds ${{…}}"
    else:
        body = entry_body(entry, passthrough)
        data = {"macros": passthrough.get("macros"), "models": {model_id: body}}
        problem = load_problems(data)[1].get(model_id)
    if problem is None:
        return entry
    reason = f"llama-swap would refuse it: {problem}; rename the file or change the setting"
    return Skip(model_id, entry.model.path, reason, entry.resolution, entry.notes)


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
) -> CommentedMap:
    """The document as a node tree, comments attached; checkable before it is written."""
    root = CommentedMap()
    root.yaml_set_start_comment(
        "\n".join(
            [
                f"Generated by backendmgr {single_line(version)}. Do not edit: backendmgr "
                "rewrites this file;",
                "change the backendmgr config instead (backendmgr set / pin / default).",
                f"{HASH_PREFIX[2:]}{single_line(inputs_hash)}",
            ]
        )
    )
    root["healthCheckTimeout"] = health_check_timeout
    for key, value in passthrough.items():
        if key != "models":
            root[_string(str(key))] = _node(value)
    models = CommentedMap()
    root["models"] = models
    items: list[tuple[str, Entry | Skip]] = [(e.model.id, e) for e in entries]
    items += [(s.id, s) for s in skipped]
    items.sort(key=lambda pair: pair[0])
    pending: list[str] = []  # comment lines waiting for the next model key
    for model_id, item in items:
        if isinstance(item, Skip):
            pending += _skip_lines(item)
            continue
        pending += [single_line(item.comment), *(f"NOTE {single_line(n)}" for n in item.notes)]
        key = _string(model_id)
        models[key] = _body(item, passthrough)
        models.yaml_set_comment_before_after_key(key, before="\n".join(pending), indent=2)
        pending = []
    if pending:  # skips after the last model: the document's end comment, under `models:`
        text = "".join(f"{' ' * _INDENT}# {line}\n" for line in pending)
        root.yaml_end_comment_extend([CommentToken(text, CommentMark(0), None)], clear=True)
    return root


def dump(node: Any) -> str:
    """YAML text from ruamel's round-trip emitter, which escapes every key and scalar."""
    yaml = YAML()
    yaml.Emitter = _Emitter
    yaml.indent(mapping=2, sequence=4, offset=2)
    yaml.width = 1 << 30  # never fold a long path or command line
    out = io.StringIO()
    yaml.dump(node, out)
    return out.getvalue()
