"""``up``, ``service`` and ``status``: llama-swap itself, on the generated config (issue 21);
and the follow-up after a mutation (the reload proof, the service restart on a new build)."""

from __future__ import annotations

import argparse
import signal
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ...manager import Manager
    from ..render import Renderer

Handler = Callable[["Manager", argparse.Namespace, "Renderer"], Awaitable[int]]

# Commands that may rewrite the generated file or change the activated llama-swap
# (``backends`` alone only lists: its ``add`` and ``remove`` change).
MUTATIONS = frozenset(
    {"install", "uninstall", "activate", "default", "pin", "unpin", "set", "unset", "backends"}
    | {"update", "prune", "sync", "generate"}
)

# The mutations whose services only read and write files (issue 30): with no llama-swap to
# follow up, they run with no event loop (``backends`` and ``models``: their add and remove,
# the listings being plain reads). ``install``, ``sync``, ``update`` … reach the network or run
# programs on the loop (as ``activate --canary`` does).
INLINE = frozenset(
    {"set", "unset", "pin", "unpin", "default", "activate", "generate", "backends", "models"}
)


def register(sub: argparse._SubParsersAction[Any]) -> None:
    from ...run_requests import ServiceRequest, StatusRequest, UpRequest
    from ..options import add_request

    u = sub.add_parser("up", help="run llama-swap on the generated config, in the foreground")
    add_request(u, UpRequest)
    u.set_defaults(handler=up)
    s = sub.add_parser("service", help="run llama-swap as a background service (systemd/launchd)")
    add_request(s, ServiceRequest)
    s.set_defaults(handler=service)
    st = sub.add_parser("status", help="whether llama-swap runs, and what it serves")
    add_request(st, StatusRequest)
    st.set_defaults(handler=status)


async def up(mgr: Manager, args: argparse.Namespace, out: Renderer) -> int:
    import contextlib

    import anyio
    import anyio.abc

    from ..._gc import collect_as_usual
    from ...errors import shown

    collect_as_usual()  # it supervises llama-swap for hours: the collector as Python has it

    log = out.stderr if out.json_mode else out.stdout

    def forward(line: str) -> None:
        # a closed terminal (SIGHUP follows) must not stop the draining of llama-swap's pipes
        with contextlib.suppress(OSError, ValueError):
            log.write(shown(line, 4096) + "\n")
            log.flush()

    async def on_signal(stop: anyio.Event, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        # held until the end: a second Ctrl-C must not interrupt the stopping; a closed
        # terminal or a dropped SSH session (SIGHUP) stops it like SIGTERM
        hup = (signal.SIGHUP,) if hasattr(signal, "SIGHUP") else ()
        with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM, *hup) as received:
            task_status.started()
            async for _ in received:
                if stop.is_set():
                    with contextlib.suppress(OSError, ValueError):
                        out.note("still stopping llama-swap and its model servers…")
                stop.set()

    from ...manager import UpListeners
    from ...run_requests import UpRequest
    from ..options import request_in

    request = request_in(args, UpRequest)

    def stopped(prepared: Any) -> None:
        with contextlib.suppress(OSError, ValueError):
            out.note("stopped llama-swap and every model server it started")
        if out.json_mode:
            out.document(
                {"stopped": True, "config": str(prepared.config), "listen": request.listen}
            )

    heard = UpListeners(
        on_note=out.note,
        on_warning=out.warning,
        on_line=forward,
        on_ready=out.note,
        watch=on_signal,
        adopt_orphans=True,
        on_stopped=stopped,
    )
    await mgr.up(request, heard)
    return 0


async def service(mgr: Manager, args: argparse.Namespace, out: Renderer) -> int:
    from ...run_requests import ServiceRequest
    from ..options import request_in
    from .common import report

    request = request_in(args, ServiceRequest)
    result = await mgr.service(request)
    if request.action == "status" and not out.json_mode:
        for warning in result.warnings:
            out.warning(warning)
        out.info(result.output or result.message)
        return 0
    return report(out, result)


async def status(mgr: Manager, args: argparse.Namespace, out: Renderer) -> int:
    from ...api_models import dump
    from ...errors import shown
    from ...run_requests import StatusRequest
    from ..options import request_in

    result = await mgr.swap_status(request_in(args, StatusRequest))
    if out.json_mode:
        out.document(dump(result))
        return 0
    out.info(result.message)
    if result.running:
        out.info(f"  version   {result.version or 'unknown'}")
        out.info(
            f"  config    {shown(result.config or '', 1000)}"
            + ("" if result.watching is not False else " (not watched)")
        )
        out.info(f"  page      {result.ui}")
        if result.loaded:
            out.table(
                ["model", "state", "cmd"],
                [[m.model, m.state, m.cmd.split("\n")[0]] for m in result.loaded],
                empty="",
            )
    if result.service:
        out.info(f"  service   {result.service}")
    for problem in result.problems:
        out.warning(problem)
    return 0


def runs_inline(mgr: Manager, args: argparse.Namespace) -> bool:
    """Whether this command runs without an event loop: one of :data:`INLINE`, while no
    llama-swap runs and no service is installed (a follow-up talks to them over HTTP). What
    cannot be learnt about llama-swap runs it on the loop, whose follow-up warns as ever."""
    if getattr(args, "command", None) not in INLINE or getattr(args, "canary", None):
        return False  # ``activate --canary`` measures the build: its servers run on the loop
    try:
        return mgr.swap_quiet()
    except Exception:
        return False


def with_follow_up(handler: Handler, *, quiet: bool = False) -> Handler:
    """``handler``, followed (for a mutation while llama-swap runs or a service is installed)
    by the proof that llama-swap took the change, or a restart onto a new llama-swap build.
    ``quiet``: the caller found no llama-swap and no service (:func:`runs_inline`), so there
    is nothing to follow up."""

    async def run(mgr: Manager, args: argparse.Namespace, out: Renderer) -> int:
        from ...changes import collecting

        with collecting():  # what the command changes on disk, for its result (issue 33)
            return await followed(mgr, args, out)

    async def followed(mgr: Manager, args: argparse.Namespace, out: Renderer) -> int:
        mutation = getattr(args, "command", None) in MUTATIONS or getattr(
            args, "models_action", None
        )
        if (
            not mutation
            or (args.command == "backends" and not getattr(args, "backends_action", None))
            or getattr(args, "dry_run", False)
            or getattr(args, "no_generate", False)  # tune's flag; a request's field below
            or getattr(args, "generate", True) is False
            or getattr(args, "check", False)
        ):
            return await handler(mgr, args, out)
        unknown, mark = "", None
        try:  # what cannot be learnt about llama-swap never blocks the change (issue 33)
            mark = None if quiet else await mgr.swap_mark()
        except Exception as exc:  # an unreadable service file or state: a warning, later
            unknown = _why(exc)
        wait = mark is not None and out.json_mode  # the document waits for llama-swap
        held: list[Any] = []
        if wait:
            out.document = held.append  # type: ignore[method-assign,assignment]
        try:
            code = await handler(mgr, args, out)
        finally:
            if wait:
                del out.document  # the class's method again
        if unknown and code == 0:
            out.warning(
                f"cannot tell whether llama-swap runs or a service is installed ({unknown}); "
                'if one does, "backendmgr status" shows whether it took the change'
            )
        follow = await _follow(mgr, mark, out) if mark is not None and code == 0 else None
        for document in held:
            said = {"notes": follow.notes, "warnings": follow.warnings} if follow else {}
            if any(said.values()) and isinstance(document, dict):  # reloaded, or not
                document.setdefault("changes", {})["llama_swap"] = said
            out.document(document)
        return code

    return run


async def _follow(mgr: Manager, mark: Any, out: Renderer) -> Any:
    """The follow-up after a change (the reload proof, a service restart), said on stderr;
    what it cannot learn is a warning. Returns the ``FollowUp``, or None."""
    try:
        follow = await mgr.swap_follow(mark)
    except Exception as exc:
        out.warning(f"cannot tell whether llama-swap took the change ({_why(exc)})")
        return None
    for note in follow.notes:
        out.note(note)
    for warning in follow.warnings:
        out.warning(warning)
    return follow


def _why(exc: BaseException) -> str:
    """The one line the boundary would print for ``exc``; a Ctrl-C goes on up."""
    from ...boundary import failure_of
    from ...errors import is_cancel

    if is_cancel(exc):
        raise exc
    return failure_of(exc).message


__all__ = ["INLINE", "register", "runs_inline", "with_follow_up"]
