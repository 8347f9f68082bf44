"""<TAB>: the candidates for the last word a shell hands ``backendmgr __complete``.

What each word may be comes from :mod:`.grammar`, the command line's grammar as the parsers
build it (every command's options and operands, generated from the requests), written out as
data: a <TAB> builds no parser and makes no request class, so completing ``install``'s
component costs what completing a command's name does. Ids are read live from local state,
and nothing in the data home is created or written.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, TextIO

from .grammar import GRAMMAR, Argument

if TYPE_CHECKING:
    from ..config.paths import Paths

__all__ = ["KINDS", "OPTION_KINDS", "analyse", "complete", "option_of"]

SUBCOMMANDS = "A..."
"""The ``nargs`` of a parser's subcommands (``argparse.PARSER``)."""

# What each positional argument (by its dest) names; the ids come from local state.
KINDS: dict[str, tuple[str, ...]] = {
    "build": ("builds",),
    "builds": ("builds",),
    "component": ("components",),
    "components": ("components",),
    "model": ("models",),
    "models": ("models",),
    "row": ("rows",),
    "target": ("models", "components", "builds"),
    "shell": (),
    "values": ("setting=",),  # set MODEL KEY=VALUE…
    "keys": ("setting",),  # unset MODEL KEY…
}
# Where one command takes only some of a kind (the same rule the command applies), by the
# command's name and the argument's dest: completion offers only what the command accepts.
COMMAND_KINDS: dict[tuple[str, str], tuple[str, ...]] = {
    ("pin", "row"): ("pin_rows",),
    ("default", "row"): ("default_rows",),
    ("remove", "id"): ("manual_rows",),  # backends remove
}
# Options whose values are named in local files (by the option's dest): ``--variant`` from
# the component's manifest, ``--canary`` models, bench's ``--build`` builds, ``--kind`` the
# registry's kinds.
OPTION_KINDS: dict[str, str] = {
    "variant": "variants",
    "canary": "models",
    "builds": "builds",
    "kind": "kinds",
}
# Positional slots nothing local can fill (a release tag needs the network): <TAB> there offers
# the command's options instead. A slot not listed here may want a path, left to the shell.
OPTIONS_INSTEAD = frozenset({"version"})


def _subcommands(path: str) -> Argument | None:
    return next((a for a in GRAMMAR[path] if a[2] == SUBCOMMANDS), None)


def _takes_value(argument: Argument) -> bool:
    return bool(argument[0]) and argument[2] != 0


def _option(chain: Sequence[str], word: str) -> Argument | None:
    """The option ``word`` names: exactly, in any parser the words went through, else as
    the innermost parser reads it (:func:`option_of`)."""
    name = word.split("=", 1)[0]
    for path in chain:
        for argument in GRAMMAR[path]:
            if name in argument[0]:
                return argument
    return option_of(GRAMMAR[chain[-1]], word)


def option_of(arguments: Iterable[Argument], word: str) -> Argument | None:
    """The option ``word`` (``--name``, ``--name=value``) names as argparse reads it: its
    exact name, else the one long option it is a prefix of (argparse takes ``--vari`` for
    ``--variant``, ``--conf`` for ``--config``); an unknown or ambiguous one is none."""
    name = word.split("=", 1)[0]
    exact = next((a for a in arguments if name in a[0]), None)
    if exact is not None or not name.startswith("--") or len(name) < 3:
        return exact
    matches = {a for a in arguments for o in a[0] if o.startswith(name)}
    return matches.pop() if len(matches) == 1 else None


def _all_options(chain: Sequence[str]) -> list[str]:
    """The options of the innermost command (every parser carries the global ones; the top's
    own ``--version`` is no option of a command)."""
    return sorted({o for a in GRAMMAR[chain[-1]] for o in a[0] if o.startswith("--")})


def analyse(words: Sequence[str]) -> tuple[list[str], dict[str, str]]:
    """What the last word may become: option names, command names, or kinds of ids.

    Returns (literal candidates or ``kind:<name>`` markers, global path options seen).
    """
    chain = [""]  # the parsers the words went through, by their command words
    positionals: list[str] = []
    seen: dict[str, str] = {}
    done = list(words[:-1])
    operands = False  # after "--", argparse reads every word as an operand
    i = 0
    while i < len(done):
        word = done[i]
        if word == "--" and len(chain) > 1 and not operands:
            operands = True
            i += 1
            continue
        if word.startswith("-") and word != "-" and not operands:
            option = _option(chain, word)
            if option is not None and _takes_value(option):
                _, equals, value = word.partition("=")
                if not equals:  # the value is the next word
                    value = done[i + 1] if i + 1 < len(done) else ""
                    i += 1
                if option[1] in ("config", "home") and value:
                    seen[option[1]] = value
            i += 1
            continue
        sub = _subcommands(chain[-1])
        if sub is not None and not positionals and word in (sub[3] or ()):
            chain.append(f"{chain[-1]} {word}".lstrip())
        else:
            positionals.append(word)
        i += 1
    cur = words[-1] if words else ""
    component = positionals[0] if positionals else None
    if operands:  # no option can follow: the word is an operand, whatever it starts with
        options: list[str] = []
    else:
        options = _all_options(chain)
        if len(done) >= 2 and done[-1] == "=":  # bash splits "--variant=cu" at the "="
            return _values(_option(chain, done[-2]), component, ""), seen
        previous = _option(chain, done[-1]) if done and done[-1].startswith("-") else None
        if previous is not None and _takes_value(previous) and "=" not in done[-1]:
            return _values(previous, component, ""), seen  # nothing known: paths, from the shell
        if cur.startswith("-"):
            if "=" in cur:  # --variant=cu
                name = cur.split("=", 1)[0]
                return _values(_option(chain, name), component, name + "="), seen
            return options, seen
    sub = _subcommands(chain[-1])
    if sub is not None and not positionals:
        return [c for c in sub[3] or () if not c.startswith("_")], seen
    slots = [a for a in GRAMMAR[chain[-1]] if not a[0] and a[2] != SUBCOMMANDS]
    index = len(positionals)
    if index >= len(slots) and slots and slots[-1][2] in ("*", "+"):
        index = len(slots) - 1
    if index >= len(slots):  # every argument given: what is left to type is options
        return options, seen
    _, dest, _, choices = slots[index]
    if choices is not None:
        return list(choices), seen
    if dest in OPTIONS_INSTEAD:
        return options, seen
    if dest == "values" and "=" in cur:
        return [], seen  # a value: free text
    command = chain[-1].rpartition(" ")[2]
    kinds = COMMAND_KINDS.get((command, dest), KINDS.get(dest, ()))
    return [f"kind:{k}" for k in kinds], seen


def _values(option: Argument | None, component: str | None, prefix: str) -> list[str]:
    """What an option's value may be: its choices, or a ``kind:`` read from local files
    (``prefix`` is put before each: ``--variant=`` when typed as one word)."""
    if option is None or not _takes_value(option):
        return []
    if option[3] is not None:
        return [prefix + c for c in option[3]]
    kind = OPTION_KINDS.get(option[1])
    if kind is None:
        return []
    return [f"kind:{kind}:{component or ''}:{prefix}"]


def _clean(name: str) -> bool:
    return bool(name) and name.isprintable()


def complete(
    words: Sequence[str],
    stdout: TextIO,
    config: str | os.PathLike[str] | None = None,
    home: str | os.PathLike[str] | None = None,
) -> int:
    """Write the candidates for the last of ``words`` (what follows ``__complete``), one per
    line; ``config`` and ``home`` as given before ``__complete``, unless the words name them.
    Never fails loudly: a completion that errors prints nothing."""
    words = list(words)
    if words and words[0] == "--":
        words = words[1:]
    if not words:
        words = [""]
    try:
        found, seen = analyse(words)
        names = [item for item in found if not item.startswith("kind:")]
        config, home = seen.get("config") or config, seen.get("home") or home
        for item in found:
            if item.startswith("kind:"):
                names += _ids(item, config, home)
    except Exception:  # completion must never print a traceback into a prompt
        return 0
    cur = words[-1]
    for name in dict.fromkeys(names):
        if name.startswith(cur) and _clean(name):
            stdout.write(name + "\n")
    return 0


def _ids(
    item: str, config: str | os.PathLike[str] | None, home: str | os.PathLike[str] | None
) -> list[str]:
    """The names a ``kind:`` marker of :func:`analyse` stands for, read from local files."""
    if item == "kind:components":  # the commonest <TAB>: the manifests' ids, no pydantic
        from ..catalog.ids import component_ids
        from ..config.locate import manifest_folders

        return component_ids(*manifest_folders(config, home))
    if item.startswith("kind:variants:"):
        from ..catalog.ids import variant_ids
        from ..config.locate import manifest_folders

        _, _, component, prefix = item.split(":", 3)
        return [prefix + v for v in variant_ids(component, *manifest_folders(config, home))]
    if item.count(":") >= 3:  # an option's value: kind:KIND:COMPONENT:PREFIX
        _, kind, _, prefix = item.split(":", 3)
        if kind == "kinds":
            from ..registry.kinds import KNOWN_KINDS

            return [prefix + v for v in KNOWN_KINDS]
        return [prefix + v for v in _local_ids(kind, _paths(config, home))]
    if item.startswith("kind:setting"):
        from .keys import KEY_HELP

        return [key + item[12:] for key in KEY_HELP]  # "ctx=" for set, "ctx" for unset
    return _local_ids(item[5:], _paths(config, home))


def _paths(config: str | os.PathLike[str] | None, home: str | os.PathLike[str] | None) -> Paths:
    from ..config.paths import Paths

    return Paths.resolve(config=config, home=home)


def _local_ids(kind: str, paths: Paths) -> list[str]:
    """Builds, rows or models, read live through the Manager (it writes nothing in the data
    home; the config's parsed snapshot may be refreshed beside the config)."""
    from ..manager import Manager

    return Manager(paths).local_names(kind)
