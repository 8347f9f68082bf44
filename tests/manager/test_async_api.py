"""The async ``Manager`` driven directly, in one event loop, against the real loopback mirror.

A web UI cancels by cancelling the task and reads progress from the event callback; these
tests hold the API to that: a cancel at any phase of an install leaves the old state (or, once
the build is committed, the whole new state), operations run concurrently in one process, and
every install's events arrive in order and end with exactly one terminal event.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import threading
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest
from ruamel.yaml import YAML

from backendmgr.api_models import BuildInfo, DoctorReport, dump
from backendmgr.errors import InstallFailed
from backendmgr.events import ProgressEvent
from backendmgr.manager import Manager
from backendmgr.mirror import MirrorHandler, MirrorServer
from backendmgr.requests import (
    DoctorRequest,
    GenerateRequest,
    InstallRequest,
    ListRequest,
    PinRequest,
    SetRequest,
    UnpinRequest,
)
from tests.support import VULKAN, Setup, await_until, big_release, publish_llama
from tests.support.cli import CliResult
from tests.support.manager import (
    ORDER,
    assert_old_state,
    assert_one_terminal,
    downloads_left,
    generated,
    phases,
)


async def assert_installs_after(mgr: Manager, setup: Setup, *, smoke: bool = True) -> None:
    """A cancelled install is no obstacle: the next one succeeds and leaves a sound state."""
    outcome = await mgr.install(
        InstallRequest(component="llama-server", version="b100", smoke=smoke)
    )
    assert outcome.id == "llama-server@b100-vulkan"
    assert outcome.already_installed is False
    (build,) = mgr.list_builds(ListRequest())
    assert isinstance(build, BuildInfo)  # typed, and dumped with SPEC §13's keys
    assert Path(build.path).is_file() and build.activated
    assert set(dump(build)) >= {"id", "activated", "path", "installed_at", "pinned_by"}
    assert downloads_left(setup.home) == []
    assert mgr.builds.leftovers() == []
    report = await mgr.doctor(DoctorRequest())
    assert isinstance(report, DoctorReport) and report.ok, report


# Where a release's size is not the point (a cancel before the download or after the commit),
# a small one keeps the steps around it quick.
SMALL = 1024


def exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


class Stall:
    """A mirror hook that holds matching requests until released: a server gone quiet."""

    def __init__(self, server: MirrorServer, prefix: str) -> None:
        self.prefix = prefix
        self.entered = threading.Event()
        self.release = threading.Event()
        server.hooks.append(self)

    def __call__(self, handler: MirrorHandler) -> bool:
        if handler.route.startswith(self.prefix):
            self.entered.set()
            self.release.wait(30)
        return False

    async def wait_entered(self) -> None:
        await await_until(self.entered.is_set, f"a request to {self.prefix} arrived")


async def install_cancelled_when(
    mgr: Manager, when: Callable[[ProgressEvent], bool]
) -> list[ProgressEvent]:
    """Install, and cancel the enclosing scope from the callback when ``when`` holds."""
    events: list[ProgressEvent] = []
    with anyio.fail_after(30), anyio.CancelScope() as scope:

        def sink(event: ProgressEvent) -> None:
            events.append(event)
            if when(event):
                scope.cancel()

        await mgr.install(InstallRequest(component="llama-server", version="b100"), on_event=sink)
    assert scope.cancelled_caught, [e.phase for e in events]
    return events


# --- cancel at each phase ------------------------------------------------------------------


@pytest.mark.asyncio
async def test_cancel_while_listing_releases(
    mirror: MirrorServer, mirror_root: Path, setup: Setup
) -> None:
    big_release(mirror_root, size=SMALL)
    mgr = await generated(setup)
    before = setup.snapshot()
    stall = Stall(mirror, "/repos/ggml-org/llama.cpp/releases")
    events: list[ProgressEvent] = []
    try:
        async with anyio.create_task_group() as tg:

            async def run() -> None:
                await mgr.install(
                    InstallRequest(component="llama-server", version="b100"), on_event=events.append
                )

            tg.start_soon(run)
            await stall.wait_entered()
            tg.cancel_scope.cancel()
    finally:
        stall.release.set()
    assert phases(events) == ["resolving", "cancelled"]
    assert_one_terminal(events, "cancelled")
    assert downloads_left(setup.home) == []
    await assert_old_state(mgr, setup, before)
    mirror.hooks.clear()
    await assert_installs_after(mgr, setup)


@pytest.mark.asyncio
async def test_cancel_the_task_mid_download_keeps_the_part_and_resumes(
    mirror: MirrorServer, mirror_root: Path, setup: Setup
) -> None:
    data = big_release(mirror_root)
    mirror.throttle = 512 << 10
    mgr = await generated(setup)
    before = setup.snapshot()
    events: list[ProgressEvent] = []
    started = asyncio.Event()

    def sink(event: ProgressEvent) -> None:
        events.append(event)
        if event.phase == "downloading" and event.bytes_done > 256 << 10:
            started.set()

    task = asyncio.create_task(
        mgr.install(InstallRequest(component="llama-server", version="b100"), on_event=sink)
    )
    await asyncio.wait_for(started.wait(), 20)
    task.cancel()  # what a server does when its client goes away
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 2)  # stops within a second or two, SPEC §7.8
    assert_one_terminal(events, "cancelled")
    (part,) = (setup.home / "downloads").glob("*.part")
    kept = part.stat().st_size
    assert 0 < kept < len(data)
    await assert_old_state(mgr, setup, before)

    mirror.throttle = None
    mirror.requests.clear()
    await assert_installs_after(mgr, setup)
    (headers,) = [h for p, h in mirror.requests if p.startswith("/download/")]
    assert int(headers["Range"].removeprefix("bytes=").rstrip("-")) >= kept
    (build,) = mgr.list_builds(ListRequest())
    assert build.sha256 == hashlib.sha256(data).hexdigest()


@pytest.mark.asyncio
@pytest.mark.parametrize("phase", ["downloading", "verifying", "extracting"])
async def test_cancel_when_a_phase_is_reported(
    mirror: MirrorServer, mirror_root: Path, setup: Setup, phase: str
) -> None:
    big_release(mirror_root)
    mgr = await generated(setup)
    before = setup.snapshot()
    events = await install_cancelled_when(mgr, lambda e: e.phase == phase)
    seen = phases(events)
    assert seen[: ORDER.index(phase) + 1] == ORDER[: ORDER.index(phase) + 1]
    assert "committing" not in seen
    assert_one_terminal(events, "cancelled")
    await assert_old_state(mgr, setup, before)
    await assert_installs_after(mgr, setup)


@pytest.mark.asyncio
async def test_cancel_during_the_smoke_check_kills_the_program(
    mirror: MirrorServer, mirror_root: Path, setup: Setup, tmp_path: Path
) -> None:
    marker = tmp_path / "smoke.pid"
    script = f'#!/bin/sh\necho $$ > "{marker}.tmp" && mv "{marker}.tmp" "{marker}"\nexec sleep 60\n'
    big_release(mirror_root, script=script.encode(), size=SMALL)
    mgr = await generated(setup)
    before = setup.snapshot()
    events: list[ProgressEvent] = []
    async with anyio.create_task_group() as tg:

        async def run() -> None:
            await mgr.install(
                InstallRequest(component="llama-server", version="b100"), on_event=events.append
            )

        tg.start_soon(run)
        await await_until(marker.exists, "the smoke check started the program", timeout=60)
        tg.cancel_scope.cancel()
    assert phases(events)[-2:] == ["extracting", "cancelled"]
    assert_one_terminal(events, "cancelled")
    pid = int(marker.read_text())
    # killed, not left sleeping (a cancel that lands while the process starts leaves reaping
    # to asyncio, so it may take a moment)
    await await_until(lambda: not exists(pid), f"the smoke-checked program {pid} was reaped")
    await assert_old_state(mgr, setup, before)

    # the verified archive was kept: the next attempt downloads nothing again
    mirror.requests.clear()
    await assert_installs_after(mgr, setup, smoke=False)
    assert not [p for p, _ in mirror.requests if p.startswith("/download/")]


@pytest.mark.asyncio
@pytest.mark.parametrize("phase", ["committing", "registering"])
async def test_cancel_after_the_commit_leaves_the_whole_new_state(
    mirror: MirrorServer, mirror_root: Path, setup: Setup, phase: str
) -> None:
    """Past the commit there is no old state to go back to: the build is installed and
    registered, and the cancel is still reported (the llama-swap config may lag)."""
    big_release(mirror_root, size=SMALL)
    mgr = await generated(setup)
    config_before = setup.config.read_bytes()
    events = await install_cancelled_when(mgr, lambda e: e.phase == phase)
    assert_one_terminal(events, "cancelled")
    (build,) = mgr.list_builds(ListRequest())
    assert build.id == "llama-server@b100-vulkan" and build.activated
    assert Path(build.path).is_file()
    assert mgr.builds.leftovers() == []
    assert downloads_left(setup.home) == []
    rows = {r.id: r for r in await mgr.backends()}
    assert set(rows) == {"llama-src", "llama-server", "llama-server@b100-vulkan"}
    assert setup.config.read_bytes() != config_before
    assert setup.config.read_text().startswith("# my setup\n")
    await mgr.generate(GenerateRequest())
    report = await mgr.doctor(DoctorRequest())
    assert report.ok, report
    again = await mgr.install(InstallRequest(component="llama-server", version="b100"))
    assert again.already_installed is True


# --- concurrency ---------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_two_installs_of_different_builds_run_concurrently(
    mirror: MirrorServer, mirror_root: Path, setup: Setup
) -> None:
    big_release(mirror_root, "b100")
    big_release(mirror_root, "b200")
    mirror.throttle = 4 << 20
    mgr = await generated(setup)
    events: dict[str, list[ProgressEvent]] = {"b100": [], "b200": []}
    timeline: list[tuple[str, str]] = []
    outcomes = {}

    async def install(tag: str) -> None:
        def sink(event: ProgressEvent) -> None:
            events[tag].append(event)
            timeline.append((tag, event.phase))

        outcomes[tag] = await mgr.install(
            InstallRequest(component="llama-server", version=tag), on_event=sink
        )

    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            tg.start_soon(install, "b100")
            tg.start_soon(install, "b200")

    # the two downloads overlapped: each started before the other one ended
    downloading = [i for i, (_, phase) in enumerate(timeline) if phase == "downloading"]
    spans = {
        tag: (
            min(i for i in downloading if timeline[i][0] == tag),
            max(i for i in downloading if timeline[i][0] == tag),
        )
        for tag in ("b100", "b200")
    }
    assert spans["b100"][0] < spans["b200"][1] and spans["b200"][0] < spans["b100"][1], spans
    for tag in ("b100", "b200"):
        assert phases(events[tag]) == ORDER
        assert_one_terminal(events[tag], "done")
        assert outcomes[tag].id == f"llama-server@{tag}-vulkan"
    assert sorted(b.id for b in mgr.list_builds(ListRequest())) == [
        "llama-server@b100-vulkan",
        "llama-server@b200-vulkan",
    ]
    rows = {r.id: r for r in await mgr.backends()}
    assert set(rows) == {
        "llama-src",
        "llama-server",
        "llama-server@b100-vulkan",
        "llama-server@b200-vulkan",
    }
    # both started with nothing activated: the newest ends activated, whichever registered first
    assert outcomes["b200"].activated
    assert rows["llama-server"].version == "b200"
    assert (await mgr.doctor(DoctorRequest())).ok
    assert not (await mgr.generate(GenerateRequest(check=True))).changed


@pytest.mark.asyncio
async def test_two_installs_of_the_same_build_in_one_process_install_it_once(
    mirror: MirrorServer, mirror_root: Path, setup: Setup
) -> None:
    big_release(mirror_root)
    mirror.throttle = 4 << 20
    mgr = await generated(setup)
    events: list[list[ProgressEvent]] = [[], []]
    outcomes = []

    async def install(i: int) -> None:
        outcomes.append(
            await mgr.install(
                InstallRequest(component="llama-server", version="b100"), on_event=events[i].append
            )
        )

    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            tg.start_soon(install, 0)
            tg.start_soon(install, 1)

    assert sorted(o.already_installed for o in outcomes) == [False, True]
    assert len([p for p, _ in mirror.requests if p.startswith("/download/")]) == 1
    assert sorted(phases(e) for e in events) == [ORDER, ["resolving", "registering", "done"]]
    for e in events:
        assert_one_terminal(e, "done")
    assert [b.id for b in mgr.list_builds(ListRequest())] == ["llama-server@b100-vulkan"]
    assert mgr.builds.leftovers() == [] and downloads_left(setup.home) == []
    assert (await mgr.doctor(DoctorRequest())).ok


@pytest.mark.asyncio
async def test_install_while_pin_and_generate_run(
    mirror: MirrorServer, mirror_root: Path, setup: Setup
) -> None:
    big_release(mirror_root)
    mirror.throttle = 2 << 20  # about 1.5 s: room for edit rounds meanwhile
    mgr = await generated(setup)
    done = anyio.Event()
    rounds = 0

    during = 0

    async def install() -> None:
        nonlocal during
        await mgr.install(InstallRequest(component="llama-server", version="b100"))
        during = rounds
        done.set()

    async def edit() -> None:
        nonlocal rounds
        while not done.is_set() or rounds < 3:
            await mgr.pin(PinRequest(model="qwen3-8b-q4_k_m", row="llama-src"))
            await mgr.set_overrides(
                SetRequest(model="qwen3-8b-q4_k_m", values={"ctx": str(4096 + rounds)})
            )
            await mgr.generate(GenerateRequest())
            await mgr.unpin(UnpinRequest(model="qwen3-8b-q4_k_m"))
            rounds += 1
        await mgr.pin(PinRequest(model="qwen3-8b-q4_k_m", row="llama-src"))

    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            tg.start_soon(install)
            tg.start_soon(edit)

    assert during >= 1 and rounds >= 3  # edits went through while the install ran
    settings = await mgr.settings()
    assert {r.id for r in settings.backends} == {
        "llama-src",
        "llama-server",
        "llama-server@b100-vulkan",
    }
    assert settings.models["qwen3-8b-q4_k_m"].backend == "llama-src"
    assert settings.models["qwen3-8b-q4_k_m"].ctx == 4096 + rounds - 1
    assert setup.config.read_text().startswith("# my setup\n")
    assert not (
        await mgr.generate(GenerateRequest(check=True))
    ).changed  # the output follows the last edit
    document = YAML(typ="safe").load(setup.output.read_text())
    (entry,) = document["models"].values()
    assert str(setup.manual_exe) in entry["cmd"]
    assert (await mgr.doctor(DoctorRequest())).ok


# --- progress events -----------------------------------------------------------------------


@pytest.mark.asyncio
async def test_events_arrive_in_order_and_end_with_done(
    mirror: MirrorServer, mirror_root: Path, setup: Setup
) -> None:
    data = big_release(mirror_root)
    mirror.throttle = 8 << 20
    mgr = await generated(setup)
    events: list[ProgressEvent] = []
    await mgr.install(
        InstallRequest(component="llama-server", version="b100"), on_event=events.append
    )
    assert phases(events) == ORDER
    assert_one_terminal(events, "done")
    download = [e for e in events if e.phase == "downloading"]
    assert len(download) >= 3  # a throttled download reports as it goes
    done = [e.bytes_done for e in download]
    assert done == sorted(done) and done[0] == 0 and done[-1] == len(data)
    assert {e.bytes_total for e in download} == {len(data)}
    assert {e.asset for e in download} == {VULKAN.format(tag="b100")}
    assert all(e.bytes_per_s >= 0 for e in download)

    again: list[ProgressEvent] = []
    await mgr.install(
        InstallRequest(component="llama-server", version="b100"), on_event=again.append
    )
    assert phases(again) == ["resolving", "registering", "done"]
    assert_one_terminal(again, "done")


@pytest.mark.asyncio
async def test_a_failed_install_ends_with_one_failed_event(
    mirror: MirrorServer, mirror_root: Path, setup: Setup
) -> None:
    publish_llama(mirror_root, "b100", fail=True)
    mgr = await generated(setup)
    before = setup.snapshot()
    events: list[ProgressEvent] = []
    with pytest.raises(InstallFailed) as caught:
        await mgr.install(
            InstallRequest(component="llama-server", version="b100"), on_event=events.append
        )
    assert phases(events) == ["resolving", "downloading", "verifying", "extracting", "failed"]
    assert_one_terminal(events, "failed")
    assert events[-1].message == str(caught.value)
    assert "Illegal instruction" in events[-1].message
    await assert_old_state(mgr, setup, before)


@pytest.mark.asyncio
async def test_a_refused_request_ends_with_one_failed_event(
    mirror: MirrorServer, mirror_root: Path, setup: Setup
) -> None:
    publish_llama(mirror_root, "b100")
    mgr = await generated(setup)
    before = setup.snapshot()
    events: list[ProgressEvent] = []
    with pytest.raises(Exception, match="no-such-tag") as caught:
        await mgr.install(
            InstallRequest(component="llama-server", version="no-such-tag"), on_event=events.append
        )
    assert phases(events) == ["resolving", "failed"]
    assert events[-1].message == str(caught.value)
    await assert_old_state(mgr, setup, before)


@pytest.mark.asyncio
async def test_a_dry_run_ends_with_done(
    mirror: MirrorServer, mirror_root: Path, setup: Setup
) -> None:
    publish_llama(mirror_root, "b100")
    mgr = await generated(setup)
    before = setup.snapshot()
    events: list[ProgressEvent] = []
    outcome = await mgr.install(
        InstallRequest(component="llama-server", version="b100", dry_run=True),
        on_event=events.append,
    )
    assert outcome.dry_run is True
    assert phases(events) == ["resolving", "done"]
    await assert_old_state(mgr, setup, before)


def test_the_cli_says_a_failure_once(
    cli: Callable[..., CliResult], mirror: MirrorServer, mirror_root: Path
) -> None:
    """The terminal ``failed`` event is for API clients; the CLI's error line already says it."""
    publish_llama(mirror_root, "b100", fail=True)
    result = cli("install", "llama-server")
    assert result.code == 1
    assert result.err.count("Illegal instruction") == 1, result.err
    assert result.err.rstrip().splitlines()[-1].startswith("error: llama-server --version failed")


@pytest.mark.asyncio
async def test_the_first_rate_is_not_a_burst_from_buffers(
    setup: Setup, mirror: MirrorServer, mirror_root: Path
) -> None:
    """Issue 20: the first pieces of a download arrive from socket buffers at once; a rate
    from them was absurd (194 MB/s on a 2 MB/s link). No rate is shown until it means one."""
    big_release(mirror_root, size=3 << 20)
    mirror.throttle = 2 << 20
    events: list[ProgressEvent] = []
    mgr = await generated(setup)
    await mgr.install(
        InstallRequest(component="llama-server", version="b100"), on_event=events.append
    )
    rates = [e.bytes_per_s for e in events if e.phase == "downloading" and not e.message]
    assert rates and max(rates) < 4 * (2 << 20), [round(r) for r in rates]
    assert rates[-1] > 0  # the download's own average, at its end
