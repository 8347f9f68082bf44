"""Running llama-swap on the generated config: ``up``, the background service, ``status`` and
the reload proof after a mutation (issue 21).

One service object with its collaborators passed in (paths, the settings reader, the
generator, the environment), so it depends on no other part of the Manager; :mod:`.services`
makes it and :mod:`.up` drives a foreground ``up`` with it. The I/O lives in
:mod:`backendmgr.swap`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import KW_ONLY
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._inline import in_thread
from ..config.models import Settings
from ..config.paths import Paths
from ..errors import NotFound, Refused
from ..immutable import frozen
from ..requests import GenerateRequest

if TYPE_CHECKING:  # a mutation's mark and follow-up load no server's request
    import anyio

    from ..api_models import GenerateResult
    from ..run_requests import ServiceRequest
    from ..swap.reload import Mark

__all__ = ["COMPONENT", "FollowUp", "Prepared", "SwapService"]

COMPONENT = "llama-swap"
NO_AUTH = (
    "llama-swap has no authentication unless its config sets apiKeys "
    "(llama_swap: {apiKeys: [...]} in backendmgr's config)"
)
MAX_CRASHES = 5  # restarts of a llama-swap that died after serving, per window
CRASH_WINDOW_S = 300.0
RESTART_DELAY_S = 1.0  # times the crashes in the window


@frozen(slots=True)
class Prepared:
    exe: Path
    build: str
    config: Path
    listen: str
    url: str
    warnings: list[str]


@frozen(slots=True)
class FollowUp:
    """What to tell the user after a mutation: lines that are news, and warnings."""

    notes: list[str]
    warnings: list[str]


@frozen(slots=True)
class SwapMark:
    """The state before a mutation: the reload mark (when llama-swap runs on our file), the
    generated file's digest, and the activated llama-swap build."""

    reload: Mark | None
    digest: str | None
    activated: str | None


@frozen
class SwapService:
    paths: Paths
    _: KW_ONLY
    settings: Callable[[], Awaitable[Settings]]
    output_path: Callable[[Settings], Path]
    generate: Callable[[GenerateRequest], Awaitable[GenerateResult]]
    environ: Mapping[str, str]

    # --- the build and the config -----------------------------------------------------------

    async def activated(self, settings: Settings | None = None) -> tuple[Path, str] | None:
        """The activated llama-swap build's executable and id, if one is installed."""
        from .facts import activated_id, executable_exists

        settings = settings or await self.settings()
        row, build = settings.row(COMPONENT), activated_id(settings, COMPONENT)
        if row is None or build is None or not executable_exists(row.path, on_path=False):
            return None
        return Path(row.path), build

    async def prepare(self, listen: str, *, public: bool) -> Prepared:
        """Everything ``up`` needs, or the reason it cannot start: the activated build, a
        current config (regenerated when stale, refused when ``generate --check`` fails), and
        a listen address that stays on loopback unless ``public``."""
        from ..swap.listen import parse_listen, reach_url  # up's: a mutation's mark needs neither

        host, port, loopback = parse_listen(listen)
        settings = await self.settings()
        warnings: list[str] = []
        if not loopback:
            if not public:
                raise Refused(
                    f"{listen} listens beyond this machine and {NO_AUTH}; "
                    "pass --public to do it anyway"
                )
            if not settings.llama_swap.get("apiKeys"):
                warnings.append(f"llama-swap listens on {listen}: {NO_AUTH}")
        found = await self.activated(settings)
        if found is None:
            raise NotFound('llama-swap is not installed; run "backendmgr install llama-swap"')
        written = await self.generate(GenerateRequest())
        warnings += written.warnings
        # refused with the reason, as "generate --check"
        await self.generate(GenerateRequest(check=True))
        return Prepared(
            exe=found[0],
            build=found[1],
            config=Path(written.output),
            listen=listen,
            url=reach_url(host, port),
            warnings=warnings,
        )

    # --- up -----------------------------------------------------------------------------------

    async def claim(self, *, replace: bool = False) -> tuple[list[str], Callable[[], None]]:
        """Before ``up`` starts anything: take the lock an ``up`` holds for its life, refusing
        when another ``up`` serves this home's config already (``replace``: stop it first, with
        its model servers), and clean a stale record. The notes say what was done; the
        release is for the end of ``up``."""
        import anyio

        from ..swap.process import GRACE_S, replace_running
        from ..swap.status import clean_stale, read_state, take_up_lock

        home = self.paths.home
        seen = await in_thread(read_state, home)
        if seen.link:
            raise Refused(f"{seen.stale}; up records the running llama-swap there")
        release = await in_thread(take_up_lock, home)
        running = seen.state
        if release is not None and running is None:
            cleaned = await in_thread(clean_stale, home, seen)
            return ([f"removed a stale record: {seen.stale}"] if cleaned else []), release
        if not replace:
            if release is not None:
                release()
            raise Refused(
                (
                    f"llama-swap already serves {running.config} (pid {running.pid}, on "
                    f"{running.url}, started by backendmgr up pid {running.owner})"
                    if running is not None
                    else f"another backendmgr up is starting llama-swap on {home}"
                )
                + "; stop it first, or pass --replace to stop it and start anew"
            )
        notes: list[str] = []
        stopped: set[int] = set()
        # until its up lets go of the lock: stop what it runs, once its record names it (an up
        # still starting writes its record when its llama-swap answers)
        with anyio.move_on_after(GRACE_S + 5):
            while release is None or running is not None:
                if running is not None and running.pid not in stopped:
                    stopped.add(running.pid)
                    await replace_running(running.pid, running.owner)
                    notes.append(
                        f"stopped the llama-swap that served on {running.url} (pid {running.pid})"
                    )
                if release is None:
                    release = await in_thread(take_up_lock, home)
                if release is None:
                    await anyio.sleep(0.1)
                    running = (await in_thread(read_state, home)).state
                else:
                    running = None
        if release is None:
            raise Refused(f"another backendmgr up on {home} did not stop; stop it first")
        await in_thread(clean_stale, home, await in_thread(read_state, home))
        return notes, release

    async def up(
        self,
        prepared: Prepared,
        *,
        on_line: Callable[[str], None],
        on_ready: Callable[[str], None],
        stop: anyio.Event,
        adopt_orphans: bool = False,
    ) -> None:
        """Run llama-swap until ``stop`` is set; record it for ``status`` while it runs.
        ``adopt_orphans``: this process runs nothing else (the CLI's ``up``), so the servers
        of a llama-swap that dies are handed to it and stopped (see ``swap.process``)."""
        import anyio

        from ..swap import process as swap_process
        from ..swap.process import SwapCrashed, SwapFailed, SwapRun, run_swap, swap_argv

        if adopt_orphans:
            swap_process.adopt_orphans()
        from ..swap.status import SwapState, remove_state, write_state

        pids: list[int] = []

        def ready(run: SwapRun) -> None:
            pids.append(run.pid)
            state = SwapState(
                pid=run.pid,
                owner=os.getpid(),
                listen=prepared.listen,
                url=prepared.url,
                config=str(prepared.config),
                exe=str(prepared.exe),
            )
            write_state(self.paths.home, state)
            on_ready(
                f"llama-swap ({prepared.build}) serves {prepared.config} on {prepared.url} "
                f"(its page: {prepared.url}/ui/); Ctrl-C stops it and every model server"
            )

        crashes: list[float] = []
        try:
            while True:
                try:
                    await run_swap(
                        swap_argv(prepared.exe, prepared.config, prepared.listen),
                        health_url=f"{prepared.url}/health",
                        on_line=on_line,
                        on_ready=ready,
                        stop=stop,
                    )
                    return
                except SwapCrashed as exc:
                    # it served, then died (a crash, a kill): start it again, a few times
                    now = time.monotonic()
                    crashes = [t for t in crashes if now - t < CRASH_WINDOW_S] + [now]
                    if len(crashes) > MAX_CRASHES:
                        raise SwapFailed(
                            f"{exc}; it stopped {len(crashes)} times in "
                            f"{CRASH_WINDOW_S // 60:g} minutes, so backendmgr gives up"
                        ) from None
                    on_line(
                        f"backendmgr: llama-swap stopped ({exc.status}); starting it again: "
                        f"restart {len(crashes)} of {MAX_CRASHES} "
                        f"(within {CRASH_WINDOW_S // 60:g} minutes)"
                        + (f"; its last error: {exc.error}" if exc.error else "")
                    )
                    with anyio.move_on_after(RESTART_DELAY_S * len(crashes)):
                        await stop.wait()
                    if stop.is_set():
                        return
        finally:
            for pid in pids:
                remove_state(self.paths.home, pid)

    # --- status -------------------------------------------------------------------------------

    async def status(self) -> Any:
        from ..emit.regen import edited_by_hand, written_record
        from ..errors import shown
        from ..swap.models import LoadedModel, SwapStatus
        from ..swap.places import service_file
        from ..swap.status import (
            clean_stale,
            compare_models,
            file_models,
            observe,
            read_state,
            same_file,
            served_config,
        )

        settings = await self.settings()
        output = self.output_path(settings)
        unit = service_file(dict(self.environ))
        service = str(unit) if unit.exists() else None
        seen_state = await in_thread(read_state, self.paths.home)
        state = seen_state.state
        if state is None:
            stale: list[str] = []
            if seen_state.stale is not None:
                cleaned = await in_thread(clean_stale, self.paths.home, seen_state)
                stale.append(
                    f"removed a stale record: {seen_state.stale}" if cleaned else seen_state.stale
                )
            return SwapStatus(
                running=False,
                message='llama-swap is not running; start it with "backendmgr up"'
                + (' or "backendmgr service start"' if service else ""),
                output=str(output),
                service=service,
                problems=stale,
            )
        seen = await observe(state.url)
        given, watching = served_config(state.pid)
        config = given or state.config
        problems: list[str] = []
        if seen.error:
            problems.append(seen.error)
        serves_output = same_file(config, str(output)) if config else None
        if serves_output is False:
            problems.append(f"it serves {shown(config, 1000)}, but backendmgr writes {output}")
        if given is not None and not watching:
            problems.append("it does not watch its config (-watch-config): changes need a restart")
        current: bool | None = None
        if not seen.error and serves_output:
            record = written_record(self.paths.home, output)
            if await in_thread(edited_by_hand, record, output):
                problems.append(f"{output} was changed since backendmgr wrote it")
            try:
                text = await in_thread(output.read_text)
                differences = compare_models(seen.models, file_models(text))
            except (OSError, ValueError) as exc:
                differences = [f"{output} cannot be read ({exc})"]
            current = not differences
            if differences:
                problems.append("it serves an older version of the file: " + "; ".join(differences))
        loaded = [LoadedModel(**r) for r in seen.running]
        named = f"llama-swap {seen.version}" if seen.version else "llama-swap"
        head = f"{named} runs (pid {state.pid}) on {shown(state.url)}"
        message = f"{head}, serving {shown(config, 1000)}; {len(loaded)} model(s) loaded"
        if current:
            message += "; it holds the file backendmgr last wrote"
        return SwapStatus(
            running=True,
            message=message,
            pid=state.pid,
            version=seen.version,
            listen=shown(state.listen, 200),
            url=shown(state.url, 200),
            ui=f"{shown(state.url, 200)}/ui/",
            config=config,
            watching=watching if given is not None else None,
            output=str(output),
            serves_output=serves_output,
            current=current,
            loaded=loaded,
            served=[shown(m, 200) for m in sorted(seen.models)],
            problems=problems,
            service=service,
        )

    # --- the background service -----------------------------------------------------------

    async def service(self, req: ServiceRequest) -> Any:
        from ..swap.models import ServiceResult
        from ..swap.places import UNIT_NAME, service_file, service_kind
        from ..swap.unit import ServiceSpec, control, remove_service, write_service

        action, listen, public = req.action, req.listen, req.public
        target = service_file(dict(self.environ))
        kind = service_kind()
        warnings: list[str] = []
        if action == "install":
            await self.prepare(listen, public=public)  # refuse now what the service would
            spec = ServiceSpec.for_paths(
                self.paths.config_file,
                self.paths.home,
                listen,
                public=public,
                log=self.paths.home / "swap" / "llama-swap.log",
                path=self.environ.get("PATH"),
            )
            await in_thread(write_service, spec, target)
        elif not target.exists():
            raise NotFound('no backendmgr service is installed; run "backendmgr service install"')
        said = await in_thread(control, action, target)
        if action == "uninstall":
            await in_thread(remove_service, target)
        if not said.ok and action in ("install", "uninstall"):
            tool = "launchctl" if kind == "launchd" else "systemctl --user"
            warnings.append(f"{tool} failed: {_last_line(said.output)}")
        elif not said.ok:
            raise Refused(f"{action} failed: {_last_line(said.output)}")
        messages = {
            "install": f"wrote {target}"
            + (
                "; enabled and started it"
                if said.ok
                else "; start it once the service manager runs"
            )
            + (
                f"; its log: journalctl --user -u {UNIT_NAME}"
                if kind == "systemd"
                else f"; its log: {self.paths.home / 'swap' / 'llama-swap.log'}"
            ),
            "start": "started the llama-swap service",
            "stop": "stopped the llama-swap service",
            "restart": "restarted the llama-swap service",
            "status": said.output.splitlines()[0] if said.output else "active",
            "uninstall": f"removed {target}",
        }
        if action == "install" and kind == "systemd":
            warnings.append(
                'to keep it running after logout: "loginctl enable-linger" (once per user)'
            )
        return ServiceResult(
            message=messages[action],
            changed=action != "status",
            warnings=warnings,
            action=action,
            file=str(target),
            manager=kind,
            output=said.output,
        )

    # --- after a mutation -------------------------------------------------------------------

    async def mark(self) -> SwapMark | None:
        """Note what a mutation may change; None (and no cost beyond a file read) when no
        llama-swap runs and no service is installed."""
        from ..swap.places import quiet, service_file

        if quiet(self.paths.home, dict(self.environ)):
            return None  # no record to read: what reads it (and the unit's writer) stays unloaded
        service = service_file(dict(self.environ))
        from ..swap.status import read_state

        state = (await in_thread(read_state, self.paths.home)).state
        if state is None and not service.exists():
            return None
        from ..emit.regen import file_digest
        from ..swap.reload import Mark, last_line, log_text
        from ..swap.status import Unanswered, same_file

        settings = await self.settings()
        output = self.output_path(settings)
        found = await self.activated(settings)
        reload = None
        if state is not None and same_file(state.config, str(output)):
            try:
                anchor: str | None = last_line(await log_text(state.url))
            except Unanswered:  # not answering in time: no reload to wait for
                anchor = None
            if anchor is not None:
                reload = Mark(state.url, output, anchor, None)
        return SwapMark(
            reload=reload,
            digest=await in_thread(file_digest, output),
            activated=found[1] if found else None,
        )

    async def follow(self, mark: SwapMark | None, *, timeout: float = 15.0) -> FollowUp:
        """After a mutation: a new llama-swap build restarts the service; a rewritten config
        is awaited in the running llama-swap (or a warning says it was not taken)."""
        from ..emit.regen import file_digest
        from ..swap.places import service_file
        from ..swap.reload import await_reload
        from ..swap.unit import control, is_active

        if mark is None:
            return FollowUp([], [])
        notes: list[str] = []
        warnings: list[str] = []
        found = await self.activated()
        if (found[1] if found else None) != mark.activated:
            target = service_file(dict(self.environ))
            if await in_thread(is_active, target):
                said = await in_thread(control, "restart", target)
                if said.ok:
                    notes.append("restarted the llama-swap service on the newly activated build")
                else:
                    warnings.append(f"could not restart the service: {_last_line(said.output)}")
            elif mark.reload is not None:
                warnings.append(
                    'a running "backendmgr up" still serves the old llama-swap build; restart it'
                )
            return FollowUp(notes, warnings)
        if mark.reload is None:
            return FollowUp(notes, warnings)
        output = mark.reload.config
        if await in_thread(file_digest, output) == mark.digest:
            return FollowUp(notes, warnings)
        proof = await await_reload(mark.reload, timeout=timeout)
        (notes if proof.ok else warnings).append(proof.message)
        return FollowUp(notes, warnings)


def _last_line(text: str) -> str:
    from ..errors import shown

    lines = [line for line in text.splitlines() if line.strip()]
    return shown(lines[-1], 300) if lines else "no output"
