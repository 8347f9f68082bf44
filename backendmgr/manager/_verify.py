"""``verify``: start every emitted command once, send it one request, keep what happened.

Results are cached under the data home, keyed by the entry's command line and the build it
runs (the receipt of a managed build; path, size and mtime of any other executable), so an
entry whose command or build changed reads "not verified" again.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from ..api_models import VerifyResult
from ..errors import InvalidInput, unknown
from ._base import ManagerBase
from ._models import ModelsMixin

if TYPE_CHECKING:
    from ..emit.plan import Entry

__all__ = ["VerifyMixin", "cached_result", "read_results", "verified_text", "verify_key"]

CACHE_NAME = "verify.json"
CACHE_VERSION = 1
CACHE_CAP = 4 << 20  # bytes read from the cache; a larger file is ignored
MAX_TIMEOUT_S = 24 * 3600
ENDPOINT_CHARS = 200


def _read_cache(path: Path) -> dict[str, Any]:
    """The cached results by model id; an unreadable, oversized or foreign file is empty."""
    try:
        with path.open("rb") as fh:
            raw = fh.read(CACHE_CAP + 1)
    except OSError:
        return {}
    if len(raw) > CACHE_CAP:
        return {}
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return {}
    if not isinstance(data, dict) or data.get("version") != CACHE_VERSION:
        return {}
    entries = data.get("entries")
    if not isinstance(entries, dict):
        return {}
    return {k: v for k, v in entries.items() if isinstance(k, str) and isinstance(v, dict)}


def _health_path(passthrough: dict[str, Any]) -> str | None:
    """llama-swap's ``checkEndpoint`` when the model sets one (``none``: no health check)."""
    value = passthrough.get("checkEndpoint")
    if not isinstance(value, str) or not value.strip() or len(value) > ENDPOINT_CHARS:
        return "/health"
    if value.strip().lower() == "none":
        return None
    return "/" + value.strip().lstrip("/")


REASON_SHOWN = 100
"""Characters of a failure's reason that ``models`` shows beside the entry."""


def verified_text(record: VerifyResult | None, now: datetime | None = None) -> str:
    """``verified today: ok in 1.0 s, 6.31 GiB`` or ``not verified``."""
    if record is None:
        return "not verified"
    try:
        when = datetime.fromisoformat(str(record.verified_at))
    except ValueError:
        return "not verified"
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    days = ((now or datetime.now(UTC)).date() - when.astimezone(UTC).date()).days
    ago = {0: "today", 1: "yesterday"}.get(days, f"{days} days ago")
    if record.ok:
        parts = [f"ok in {record.ready_s or 0:.1f} s"]
        if record.gpu_gib is not None:
            parts.append(f"{record.gpu_gib:.2f} GiB")
        return f"verified {ago}: " + ", ".join(parts)
    reason = (record.reason or "unknown reason").split(" | ")[0]
    if len(reason) > REASON_SHOWN:  # the whole output is in verify's own report, not here
        reason = reason[: REASON_SHOWN - 1] + "…"
    return f"verified {ago}: failed ({reason})"


def _build_identity(mgr: ManagerBase, entry: Entry) -> str:
    """What the entry's executable is: the receipt of a managed build, else its file."""
    row = entry.resolution.row
    if row is not None and row.managed and row.component and row.version:
        installed = mgr.builds.get(row.component, row.version, row.variant)
        if installed is not None:
            return installed.receipt.model_dump_json()
    exe = entry.argv[0]
    found = shutil.which(exe, path=mgr.environ.get("PATH")) or exe
    try:
        st = os.stat(found)
    except OSError:
        return f"{found}:missing"
    return f"{found}:{st.st_size}:{st.st_mtime_ns}"


def verify_key(mgr: ManagerBase, entry: Entry) -> str:
    """The cache key: the command line, the build it runs and its ``env`` (when it has one,
    so that keys of entries without one stay as they were)."""
    from ..emit.document import entry_env

    parts: list[Any] = [entry.argv, _build_identity(mgr, entry)]
    parts += [entry_env(entry)] if entry_env(entry) else []  # issue 24: another device
    text = json.dumps(parts, ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()


def read_results(mgr: ManagerBase) -> dict[str, Any]:
    return _read_cache(mgr.paths.home / CACHE_NAME)


def cached_result(mgr: ManagerBase, entry: Entry, cache: dict[str, Any]) -> VerifyResult | None:
    """The cached result for ``entry`` when its command and build are unchanged (a record
    of the wrong shape reads as not verified)."""
    from pydantic import ValidationError

    record = cache.get(entry.model.id)
    if not isinstance(record, dict) or record.get("key") != verify_key(mgr, entry):
        return None
    try:
        return VerifyResult.model_validate({k: v for k, v in record.items() if k != "key"})
    except ValidationError:
        return None


def _bind(
    on_start: Callable[[str, int], None] | None, model_id: str
) -> Callable[[int], None] | None:
    if on_start is None:
        return None
    return lambda pid: on_start(model_id, pid)


class VerifyMixin(ModelsMixin):
    @property
    def _verify_cache(self) -> Path:
        return self.paths.home / CACHE_NAME

    def _record(self, model_id: str, record: dict[str, Any]) -> None:
        """Add one result to the cache: a locked read-modify-write, written atomically."""
        from filelock import FileLock

        from .._fs import atomic_write_bytes

        self.paths.locks.mkdir(parents=True, exist_ok=True)
        with FileLock(self.paths.locks / "verify.lock", timeout=30):
            entries = _read_cache(self._verify_cache)
            entries[model_id] = record
            body = json.dumps({"version": CACHE_VERSION, "entries": entries}, indent=1)
            atomic_write_bytes(self._verify_cache, body.encode())

    async def verify(
        self,
        model_ids: list[str] | None = None,
        *,
        timeout: float | None = None,
        keep_going: bool = False,
        on_result: Callable[[VerifyResult], None] | None = None,
        on_start: Callable[[str, int], None] | None = None,
    ) -> list[VerifyResult]:
        """Check each named model (all emitted ones when none): one result per model run.

        Without ``keep_going`` the first failure ends the run. ``on_start`` hears each child's
        pid (tests check it is gone afterwards).
        """
        from ..emit.devices import entry_environ
        from ..emit.document import entry_env
        from ..emit.plan import Entry
        from ..measure.diagnose import failure_cause
        from ..serve_check import check_command

        if timeout is not None and not 0 < timeout <= MAX_TIMEOUT_S:
            raise InvalidInput(f"--timeout must be between 0 and {MAX_TIMEOUT_S} seconds")
        settings, found, plans, _ = await self.plan()
        by_id = {m.id: p for m, p in zip(found.models, plans, strict=True)}
        skipped = {s.id: s.reason for s in found.skipped}
        chosen: list[tuple[str, Any]] = []
        for model_id in dict.fromkeys(model_ids or []):
            if model_id in by_id:
                chosen.append((model_id, by_id[model_id]))
            elif model_id in skipped:
                chosen.append((model_id, skipped[model_id]))
            else:
                raise unknown(
                    f'no model "{model_id}" was discovered',
                    model_id,
                    list(by_id) + list(skipped),
                    hint='see "backendmgr models"',
                )
        if not model_ids:
            chosen = sorted((i, p) for i, p in by_id.items() if isinstance(p, Entry))
        limit = float(timeout if timeout is not None else settings.health_check_timeout)
        results: list[VerifyResult] = []
        for model_id, planned in chosen:
            if not isinstance(planned, Entry):
                reason = planned if isinstance(planned, str) else planned.reason
                result = VerifyResult(
                    id=model_id,
                    ok=False,
                    reason=f"skipped: {reason}",
                    ready_s=None,
                    gpu_gib=None,
                    est_vram_gb=None,
                )
            else:
                check = await check_command(
                    planned.argv,
                    role=planned.model.role,
                    model_id=model_id,
                    health_path=_health_path(planned.passthrough),
                    timeout=limit,
                    env=entry_environ(self.environ, entry_env(planned)),  # issue 24
                    on_start=_bind(on_start, model_id),
                )
                result = VerifyResult(
                    id=model_id,
                    ok=check.ok,
                    reason=check.reason,
                    ready_s=check.ready_s,
                    gpu_gib=check.gpu_gib,
                    est_vram_gb=planned.metadata.get("est_vram_gb"),
                    backend=planned.resolution.row.id if planned.resolution.row else None,
                    verified_at=datetime.now(UTC).isoformat(timespec="seconds"),
                    device=check.device,  # issue 24
                    cause=failure_cause(
                        settings, planned.model, planned.resolution, check.log or check.reason
                    ),
                )
                record = {**result.model_dump(mode="json"), "key": verify_key(self, planned)}
                await anyio.to_thread.run_sync(self._record, model_id, record)
            results.append(result)
            if on_result is not None:
                on_result(result)
            if not result.ok and not keep_going:
                break
        return results
