"""The typed results of ``up``, ``service`` and ``status`` (the CLI's ``--json`` and the API)."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from ..results import Outcome

__all__ = ["LoadedModel", "ServiceResult", "SwapStatus"]


class LoadedModel(BaseModel):
    model_config = ConfigDict(defer_build=True)

    model: str
    state: str
    cmd: str


class SwapStatus(BaseModel):
    """Whether llama-swap runs, what it serves, and whether that is backendmgr's last file."""

    model_config = ConfigDict(defer_build=True)

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
    loaded: list[LoadedModel] = Field(default_factory=list)
    served: list[str] = Field(default_factory=list)
    problems: list[str] = Field(default_factory=list)
    service: str | None = None  # the installed service file, if any


@dataclass(kw_only=True)
class ServiceResult(Outcome):
    action: str
    file: str
    manager: str  # systemd or launchd
    output: str = ""  # what systemctl / launchctl said
