"""One planned entry as llama-swap must read it, as plain data (SPEC §12.1), and the
screen that leaves out a model llama-swap would refuse. Pure and free of any YAML library:
a read plans every model without loading the emitter (:mod:`.document` writes the text)."""

from __future__ import annotations

import re
from typing import Any
from weakref import WeakKeyDictionary

from .macros import MERGE_KEY, declared, model_problem, shell_line
from .plan import Entry, Skip, render_token

__all__ = [
    "HASH_PREFIX",
    "entry_body",
    "entry_cmd",
    "entry_env",
    "plain_safe",
    "screen",
    "screened_body",
    "single_line",
]

HASH_PREFIX = "# inputs: sha256:"


def single_line(text: str) -> str:
    """One printable line: a name from a file must never end a comment and start YAML."""
    if not text.isprintable():  # the rare line: character by character
        text = "".join(ch if ch.isprintable() else "?" for ch in text)
    return " ".join(text.split())


_PLAIN = re.compile(r"[A-Za-z_/][A-Za-z0-9_./=+-]*")
_YAML11_WORDS = frozenset({"y", "n", "yes", "no", "on", "off", "true", "false", "null"})


def plain_safe(text: str) -> bool:
    """Whether ``text`` reads back as the same string when written plain, by any YAML 1.1
    or 1.2 parser: no indicator, space, number, timestamp, boolean or null look-alike."""
    return bool(_PLAIN.fullmatch(text)) and text.lower() not in _YAML11_WORDS


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
    lines = [" ".join(map(render_token, group)) for group in entry.groups if group]
    if entry.extra_args:
        lines.append(shell_line(entry.extra_args, _defined(entry, passthrough)))
    return "\n".join(lines)


def entry_env(entry: Entry) -> list[str]:
    """The ``env`` an entry gets: the user's passthrough ``env`` if set (it replaces ours, as
    every passthrough key does), else the device variables and the model's ``env`` words."""
    theirs = entry.passthrough.get("env")
    return list(theirs) if isinstance(theirs, list) else list(entry.env)


# each entry's body for the passthrough it was made with, and whether the screen passed it:
# the screen of a plan makes it, and the document written from that plan takes the same (an
# edit made every body twice, and checked its macros twice); an entry is frozen, and its
# body goes when the entry does
_BODIES: WeakKeyDictionary[Entry, tuple[dict[str, Any] | None, dict[str, Any], bool]]
_BODIES = WeakKeyDictionary()


def entry_body(entry: Entry, passthrough: dict[str, Any] | None = None) -> dict[str, Any]:
    """The entry's model mapping as plain data: what llama-swap must read back. Read only:
    the same mapping is given for the same entry and passthrough."""
    return screened_body(entry, passthrough)[0]


def screened_body(
    entry: Entry, passthrough: dict[str, Any] | None = None
) -> tuple[dict[str, Any], bool]:
    """:func:`entry_body`, and whether :func:`screen` passed that very body (for this
    passthrough): llama-swap's macro pass (:func:`.macros.model_problem`) found nothing in
    it. One look-up for both: a write asks for every entry."""
    made = _BODIES.get(entry)
    if made is not None and made[0] is passthrough:
        return made[1], made[2]
    body = _body(entry, passthrough)
    _BODIES[entry] = (passthrough, body, False)
    return body, False


def _body(entry: Entry, passthrough: dict[str, Any] | None) -> dict[str, Any]:
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
        made = _BODIES.get(entry)  # the body, made once per entry and passthrough
        body = made[1] if made is not None and made[0] is passthrough else _body(entry, passthrough)
        # the macro pass of a document of this model
        problem = model_problem(model_id, body, declared(passthrough.get("macros")))
        _BODIES[entry] = (passthrough, body, problem is None)
    if problem is None:
        return entry
    reason = f"llama-swap would refuse it: {problem}; rename the file or change the setting"
    return Skip(model_id, entry.model.path, reason, entry.resolution, entry.notes)
