"""The typed results of ``up``, ``service`` and ``status`` (the CLI's ``--json`` and the API):
result documents, dumped with only the keys the Manager set (:func:`backendmgr.results.dump`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..results import Outcome, Result

__all__ = ["LoadedModel", "ServiceResult", "SwapStatus"]


@dataclass(kw_only=True, repr=False, eq=False)
class LoadedModel(Result):
    __pydantic_config__: ClassVar[dict[str, Any]] = {}  # its schema as before: extra ignored

    model: str
    state: str
    cmd: str


@dataclass(kw_only=True, repr=False, eq=False)
class SwapStatus(Result):
    """Whether llama-swap runs, what it serves, and whether that is backendmgr's last file."""

    __pydantic_config__: ClassVar[dict[str, Any]] = {}

    running: bool
    message: str
    pid: int | None = None
    version: str | None = None
    listen: str | None = None
    url: str | None = None
    ui: str | None = None
    config: str | None = None
    watching: bool | None = None
    output: str
    serves_output: bool | None = None  # it was given the file backendmgr writes
    current: bool | None = None  # and serves what that file says now
    loaded: list[LoadedModel] = field(default_factory=list)
    served: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    service: str | None = None  # the installed service file, if any


@dataclass(kw_only=True, repr=False, eq=False)
class ServiceResult(Outcome):
    action: str
    file: str
    manager: str  # systemd or launchd
    output: str = ""  # what systemctl / launchctl said
