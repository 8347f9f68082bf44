"""One module per command (or command pair); each adds its parser and an async handler.

``COMMANDS`` is the table of every command (its module and its help, in ``--help`` order): a
run builds only its own command's parser from the module, and a stand-in carrying the help for
each of the others, since building all ~35 costs more than the interpreter's start-up. A
module's ``PARSERS`` maps each of its commands to the function that adds its parser (only the
one being run is called); a module's ``register`` instead adds them all, its siblings' as
throwaways when one runs.
``tests/cli/test_startup.py`` holds it to what the modules build.
"""

from __future__ import annotations

import argparse
import importlib
from typing import Any

__all__ = ["COMMANDS", "register"]

COMMANDS: dict[str, tuple[str, str | None]] = {
    "catalog": ("builds", "components, variants here, suggested variant and why"),
    "releases": ("builds", "recent versions and the variants each ships here"),
    "install": ("builds", "install a build (VERSION defaults to the latest)"),
    "uninstall": ("builds", "remove installed builds (all or none)"),
    "activate": ("builds", "switch the activated build of a component"),
    "list": ("builds", "installed builds"),
    "doctor": ("builds", "registry vs disk, stale pins, leftovers"),
    "backends": ("backends", "the registry in order; add or remove manual rows"),
    "default": ("backends", "make ROW the ★ of every class its kind serves"),
    "pin": ("pin", "keep MODEL on one registry row (e.g. a build)"),
    "unpin": ("pin", "let MODEL follow the class default again"),
    "set": ("overrides", "set per-model overrides (ctx, vllm_gpu_util, extra_args, …)"),
    "unset": ("overrides", "clear per-model overrides"),
    "models": ("models", "discovered models, the row each resolves to, and why"),
    "cmd": ("models", "print the command line a model gets"),
    "generate": ("models", "regenerate the llama-swap config"),
    "update": ("maintenance", "install and activate the newest release of installed components"),
    "prune": ("maintenance", "remove builds neither activated nor pinned"),
    "cache": ("maintenance", "the download and release-listing cache"),
    "which": ("maintenance", "the executable that would run, and why"),
    "config": ("maintenance", "where the files are; the effective settings"),
    "lock": (
        "lock",
        "write backendmgr.lock: the exact builds installed here and the activated ones",
    ),
    "sync": ("lock", "install, verify and activate exactly the builds of a lock"),
    "fetch": ("lock", "download every asset of a lock into DIR, laid out for scripts/mirror.py"),
    "completion": ("completion", "print a shell completion script"),
    "__complete": ("completion", None),  # hidden: no help keeps it out of the command list
    "verify": ("verify", "start each model's command once, send one request, stop it"),
    "tune": ("tune", "find the largest context that starts and fits the memory budget"),
    "bench": ("bench", "prompt and generation speed of models per build, measured"),
    "bisect": ("bisect", "find the first release that made a model slower or stop starting"),
    "up": ("swap", "run llama-swap on the generated config, in the foreground"),
    "service": ("swap", "run llama-swap as a background service (systemd/launchd)"),
    "status": ("swap", "whether llama-swap runs, and what it serves"),
    "serve": ("serve", "a local web page and HTTP API over the same operations"),
}


class _Only:
    """What a module's ``register`` adds parsers to when one command is being run: that
    command's parser is real, its siblings' are thrown away (the table lists them)."""

    def __init__(self, sub: argparse._SubParsersAction[Any], only: str) -> None:
        self._sub = sub
        self._only = only

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser:
        if name == self._only:
            parser: argparse.ArgumentParser = self._sub.add_parser(name, **kwargs)
            return parser
        stand_in: argparse.ArgumentParser = self._sub._parser_class(add_help=False, stub=True)
        return stand_in  # never parsed with


def register(sub: argparse._SubParsersAction[Any], only: str | None = None) -> None:
    """Every command's parser (``only`` is ``None``), or ``only``'s and the others listed
    with their help (``only`` is ``""`` for none: ``--help``, an unknown command). The listed
    ones share one stand-in parser: building one per command costs more than the rest of
    ``--help``, and a stand-in is only reached by words that run no command."""
    done: set[str] = set()
    stand_in: argparse.ArgumentParser | None = None
    for name, (module_name, help_text) in COMMANDS.items():
        if only is None or name == only:
            if module_name not in done:
                done.add(module_name)
                module = importlib.import_module(f".{module_name}", __name__)
                own = getattr(module, "PARSERS", None)  # a module that builds each on its own
                if own is not None:
                    for add in own.values() if only is None else [own[name]]:
                        add(sub)
                else:
                    module.register(sub if only is None else _Only(sub, name))
            continue
        if stand_in is None:
            stand_in = sub._parser_class(add_help=False, stub=True)
        if help_text is not None:  # a choice without help is hidden from --help
            sub._choices_actions.append(sub._ChoicesPseudoAction(name, (), help_text))
        sub._name_parser_map[name] = stand_in
