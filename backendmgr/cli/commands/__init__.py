"""One module per command (or command pair); each adds its parser and an async handler.

``COMMANDS`` is the static table of every command (its module and its help, in ``--help``
order): a run builds only its own command's parser from the module, and a stand-in carrying the
help for each of the others. ``tests/cli/test_startup.py`` holds it to what the modules build.
"""

from __future__ import annotations

import argparse
import importlib

from ..table import COMMANDS

TYPE_CHECKING = False  # typing's own constant costs the import of typing (mypy: always_true)
if TYPE_CHECKING:
    from typing import Any

__all__ = ["COMMANDS", "register"]


class _Only:
    """What a module's ``register`` adds parsers to when one command is being run: that
    command's parser is real, its siblings' are thrown away (the table's stand-ins list them)."""

    def __init__(self, sub: argparse._SubParsersAction[Any], only: str) -> None:
        self._sub = sub
        self._only = only

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser:
        if name == self._only:
            parser: argparse.ArgumentParser = self._sub.add_parser(name, **kwargs)
            return parser
        return argparse.ArgumentParser(add_help=False)  # never parsed with


def register(sub: argparse._SubParsersAction[Any], only: str | None = None) -> None:
    """Every command's parser (``only`` is ``None``), or ``only``'s and a stand-in for each of
    the others (``only`` is ``""`` for none: ``--help``, an unknown command)."""
    done: set[str] = set()
    for name, (module_name, help_text) in COMMANDS.items():
        if only is None or name == only:
            if module_name not in done:
                done.add(module_name)
                module = importlib.import_module(f".{module_name}", __name__)
                module.register(sub if only is None else _Only(sub, name))
            continue
        extra: dict[str, Any] = {"add_help": False, "stub": True}
        if help_text is not None:  # a choice without help is hidden from --help
            extra["help"] = help_text
        sub.add_parser(name, **extra)
