"""Checks for tests that drive the async ``Manager`` directly: a cancelled or failed operation
leaves the old state, and every install's events end with exactly one terminal event."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from backendmgr.requests import DoctorRequest, GenerateRequest, ListRequest
from tests.support.archives import tree
from tests.support.user import Setup

if TYPE_CHECKING:
    from backendmgr.manager import Manager

ORDER = [
    "resolving",
    "downloading",
    "verifying",
    "extracting",
    "committing",
    "registering",
    "done",
]
TERMINAL = {"done", "failed", "cancelled"}


def manager() -> Manager:
    """A Manager as a server would hold one: the environment the fixtures set, fast retries."""
    from backendmgr.manager import Manager

    return Manager(retry_backoff=0.01)


async def generated(setup: Setup) -> Manager:
    """A Manager whose llama-swap config was generated (so ``setup.snapshot()`` works)."""
    mgr = manager()
    outcome = await mgr.generate(GenerateRequest())
    setup.output = Path(outcome.output)
    assert setup.output.is_file()
    return mgr


def _phase(event: Any) -> str:
    return str(event["phase"] if isinstance(event, Mapping) else event.phase)


def phases(events: Sequence[Any]) -> list[str]:
    """Each phase once, in the order first seen (events as objects or as JSON)."""
    out: list[str] = []
    for e in events:
        if not out or out[-1] != _phase(e):
            out.append(_phase(e))
    return out


def assert_one_terminal(events: Sequence[Any], terminal: str) -> None:
    assert [_phase(e) for e in events if _phase(e) in TERMINAL] == [terminal]
    assert _phase(events[-1]) == terminal


def builds_tree(home: Path) -> list[str]:
    folder = home / "builds"
    return tree(folder) if folder.exists() else []


def downloads_left(home: Path) -> list[str]:
    folder = home / "downloads"
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


async def assert_old_state(mgr: Manager, setup: Setup, before: tuple[bytes, bytes]) -> None:
    """Nothing installed, no scratch folder, the user's files byte for byte as they were;
    only resumable downloads may stay, and doctor finds nothing to complain about."""
    assert mgr.list_builds(ListRequest()) == []
    assert [p for p in builds_tree(setup.home) if not p.endswith(".lock")] in ([], ["llama-server"])
    assert all(n.endswith((".part", ".part.json")) for n in downloads_left(setup.home))
    assert mgr.builds.leftovers() == []
    assert setup.snapshot() == before
    report = await mgr.doctor(DoctorRequest())
    assert report.ok, report
