"""A build's receipt: the file whose presence and validity make a folder an installed build
(SPEC §7.4). Loaded when a build folder is read; listing an empty builds folder, and every
read that never opens one, skip it (and the capabilities record it holds)."""

from __future__ import annotations

import json
from dataclasses import field, fields
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from .._fs import read_regular
from ..catalog.capabilities import Capabilities
from ..immutable import frozen
from ..record import After, Before, Invalid, Limit, Record, instant, load, plain

if TYPE_CHECKING:
    from ..registry.installed import InstalledBuild

__all__ = [
    "MAX_RECEIPT_BYTES",
    "RECEIPT",
    "AssetRecord",
    "InstalledEntry",
    "Receipt",
    "read_receipt",
    "receipt_json",
]

RECEIPT = ".backendmgr.json"
RECEIPT_VERSION = 1
MAX_RECEIPT_BYTES = 16 << 20
"""A receipt lists a build's assets or packages: far below this; a bigger one is not ours."""


def _known(cls: type, data: Any) -> Any:
    """``data`` without the keys ``cls`` does not name: a receipt written by a later
    backendmgr, with a field this one does not know, is still a build."""
    if not isinstance(data, dict):
        return data
    names = {f.name for f in fields(cls)}
    return {k: v for k, v in data.items() if k in names}


def _usable_version(value: str) -> str:
    """A version that could not be installed today (a newline, a bidi override, thousands
    of digits) makes the receipt unusable: the folder is a leftover, not a build."""
    from ..sources.models import tag_problem

    problem = tag_problem(value)
    if problem is not None:
        raise ValueError(problem)
    return value


def _inside(value: str) -> str:
    """The executable, relative to the build folder and inside it, as installs write it: an
    absolute path or a ``..`` would make another program this build's."""
    if not value or value.startswith("/") or any(p in ("", ".", "..") for p in value.split("/")):
        raise ValueError(f"not a path inside the build folder: {value!r}")
    return value


def _capabilities_or_unknown(value: Any) -> Any:
    """A malformed probe record means "unknown"; it must never un-install the build."""
    try:
        load(Capabilities, _known(Capabilities, value), "capabilities")
    except Invalid:
        return None
    return _known(Capabilities, value)


def _assets(value: Any) -> Any:
    return [_known(AssetRecord, a) for a in value] if isinstance(value, list) else value


@frozen(kw_only=True)
class AssetRecord(Record):
    name: str
    url: str
    size: Annotated[int, Limit(ge=0)]
    sha256: str
    verified_by: Literal["digest", "checksums", "none"]


@frozen(kw_only=True)
class Receipt(Record):
    """The only "installed" signal. ``format`` lets a later backendmgr convert old receipts."""

    format: int = RECEIPT_VERSION
    component: str
    version: Annotated[str, After(_usable_version)]
    variant: str
    source: str
    exe: Annotated[str, After(_inside)]
    kind: str = ""
    name: str = ""
    assets: Annotated[list[AssetRecord], Before(_assets)] = field(default_factory=list)
    installed_at: Annotated[str, After(instant)]
    """ISO 8601 text, as the file holds it (:attr:`installed`: the time itself)."""
    size_bytes: Annotated[int, Limit(ge=0)] = 0
    backendmgr_version: str
    python: str | None = None
    packages: dict[str, str] | None = None
    tool_parsers: list[str] | None = None
    capabilities: Annotated[Capabilities | None, Before(_capabilities_or_unknown)] = None

    @property
    def installed(self) -> datetime:
        return datetime.fromisoformat(self.installed_at)


@frozen(slots=True, eq=True)
class InstalledEntry:
    dir: Path
    receipt: Receipt

    @property
    def id(self) -> str:
        from ..registry.rows import build_row_id

        return build_row_id(self.receipt.component, self.receipt.version, self.receipt.variant)

    @property
    def exe_path(self) -> Path:
        return self.dir.joinpath(*self.receipt.exe.split("/"))

    def as_build(self) -> InstalledBuild:
        """The receipt's fields the registry reads, with the executable's full path."""
        from ..registry.installed import InstalledBuild

        r = self.receipt
        return InstalledBuild(
            component=r.component,
            version=r.version,
            variant=r.variant,
            exe=str(self.exe_path),
            kind=r.kind,
            name=r.name,
            installed_at=r.installed,
        )


def receipt_json(receipt: Receipt) -> str:
    """The receipt as its file holds it (and as ``facts`` and ``models`` fingerprint it)."""
    return json.dumps(plain(receipt), indent=2, ensure_ascii=False)


def read_receipt(folder: Path) -> Receipt | None:
    """The receipt in ``folder``, or None when there is none or it is not a receipt this
    backendmgr can read (corrupt, foreign, a version it could not install)."""
    try:
        raw = read_regular(folder / RECEIPT, MAX_RECEIPT_BYTES)  # a FIFO: no receipt
        if len(raw) > MAX_RECEIPT_BYTES:
            return None
        return load(Receipt, _known(Receipt, json.loads(raw)), str(folder / RECEIPT))
    except (OSError, ValueError, RecursionError):  # Invalid and JSON errors are ValueErrors
        return None
