"""ruamel.yaml's objects as backendmgr makes them for one document at a time; imported only by
what loads or writes YAML (a read of kept inputs imports no YAML library).

ruamel's resolver asks which YAML version applies twice for every scalar it resolves, and
finds out through two failed attribute look-ups each time (~2 µs: ~15 ms of a 200-model
config's load, as ``doctor`` and ``generate --check`` read it; the re-read before a write
walks the parser's events instead, :func:`.emit.verify.reread_emitted`). Where the answer
cannot come from the document, it is the same for the whole document and is looked up once:
reading with ruamel's C parser (which never hands the resolver a ``%YAML`` directive; the
pure parser does, so it keeps ruamel's resolver). (The llama-swap config is written from
events, :mod:`.emit.document`, with no resolver at all.)
"""

from __future__ import annotations

from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.parser import Parser
from ruamel.yaml.resolver import VersionedResolver

__all__ = ["OnceResolver", "safe_yaml"]


class OnceResolver(VersionedResolver):
    """ruamel's resolver, with the processing version looked up at its first use only: for
    one document read by the C parser, with a fresh ``YAML`` object each."""

    _once: Any = None

    @property
    def processing_version(self) -> Any:
        if self._once is None:
            self._once = VersionedResolver.processing_version.fget(self)  # type: ignore[attr-defined]
        return self._once


def safe_yaml() -> YAML:
    """``YAML(typ="safe")`` for one load: the C parser where ``ruamel.yaml.clib`` is installed,
    the version looked up once with it."""
    yaml = YAML(typ="safe")
    if yaml.Parser is not Parser:
        yaml.Resolver = OnceResolver
    return yaml
