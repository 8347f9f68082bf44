"""What a mutation returns: one typed document that carries the sentence for people too.

Every mutation of the Manager returns a subclass of :class:`Outcome` (see
:mod:`backendmgr.api_models`); the CLI prints ``message`` (or, with ``--json``, the whole
document) and the HTTP API sends the same document, so the two cannot disagree.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer

__all__ = ["Outcome"]


class Outcome(BaseModel):
    """The result of one mutation: the data under SPEC §13's keys, plus ``message`` (the human
    line), ``changed`` (False for a dry run or a no-op) and ``warnings`` (also printed on
    stderr by the CLI)."""

    model_config = ConfigDict(defer_build=True, extra="forbid", populate_by_name=True)

    message: str
    changed: bool = True
    warnings: list[str] = Field(default_factory=list)
    # what the command changed on disk (issue 33): ``{"config": path, "generated": {"output":
    # path, "models": [ids]}, "reload": {"ok", "message"}}``, only what happened
    changes: dict[str, Any] | None = None

    @model_serializer(mode="wrap")
    def _shown(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # ``changed`` always, ``warnings`` only when there are any: documents are dumped with
        # exclude_unset, which would otherwise drop a default True and keep an empty list.
        data: dict[str, Any] = handler(self)
        data["changed"] = self.changed
        data.pop("warnings", None)
        if self.warnings:
            data["warnings"] = list(self.warnings)
        return data

    def warn(self, *warnings: str) -> None:
        """Add warnings found after the result was built (a missing checksum, a GPU build that
        sees no GPU)."""
        if warnings:
            self.warnings = [*self.warnings, *warnings]
