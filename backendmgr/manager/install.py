"""``install``: one orchestration for every build, archive or venv (SPEC §7, §8): resolve,
then either say what a dry run would do, or take the build's lock, build it unless it is
there (or another process just built it), register it, and regenerate."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import anyio

from ..api_models import AssetInfo, InstallResult
from ..catalog.capabilities import missing_gpu
from ..errors import NotFound
from ..events import EventSink, ProgressEvent
from ..immutable import frozen
from ..install.store import InstalledEntry
from ..record import plain
from ..registry import rows as registry
from ..registry.kinds import classes_of
from ..requests import InstallRequest
from .activate import Activation, Registered
from .context import Context
from .facts import executable_exists
from .install_source import BuildSource, How, Locked, open_source
from .probe import GpuProbe
from .releases import Releases

if TYPE_CHECKING:
    from ..catalog.manifest import Manifest
    from .generate import Generator

__all__ = ["Installer", "Locked"]


@frozen
class Installer:
    ctx: Context
    probe: GpuProbe
    releases: Releases
    activation: Activation
    generator: Generator

    async def install(
        self,
        req: InstallRequest,
        on_event: EventSink | None = None,
        locked: Locked | None = None,
        *,
        auto_activate: bool = True,
    ) -> InstallResult:
        """Install one build; ``on_event`` sees the phases in order and then exactly one
        terminal event: ``done``, ``failed`` (its message is the error's) or ``cancelled``.
        ``auto_activate=False``: never activated unless ``req.activate`` (``sync`` decides)."""
        emit = on_event or (lambda event: None)
        try:
            outcome = await self._install(req, emit, locked or Locked(), auto_activate)
        except (anyio.get_cancelled_exc_class(), KeyboardInterrupt):
            emit(ProgressEvent("cancelled"))
            raise
        except BaseException as exc:
            from ..boundary import failure_of

            emit(ProgressEvent("failed", message=failure_of(exc).message))
            raise
        emit(ProgressEvent("done"))
        return outcome

    async def _install(
        self, req: InstallRequest, emit: EventSink, locked: Locked, auto: bool
    ) -> InstallResult:
        from ..catalog.matching import suggest_variant

        ctx = self.ctx
        manifest = ctx.manifest(req.component)
        # --platform without --dry-run: refused by InstallRequest's own rule when it was made
        os_name, arch = self.probe.platform(req.platform)
        plat = f"{os_name}-{arch}"
        variant = req.variant or suggest_variant(manifest, self.probe.host, plat)[0]
        if not variant:
            raise NotFound(f"{req.component} publishes nothing for {plat}")
        how = _how(req, locked)
        # An install started while its component has no activated build activates one (the
        # newest of its variant when it registers), however long its listing and download take.
        row = None if req.dry_run else (await ctx.settings()).row(manifest.id)
        first = not (row is not None and row.managed and executable_exists(row.path, on_path=False))
        emit(
            ProgressEvent("resolving", message=f"{manifest.id} {req.version or 'latest'} {variant}")
        )
        async with open_source(
            ctx, self.probe, self.releases, manifest, req.version, variant, os_name, plat, how
        ) as source:
            version = source.plan.version
            build_id = registry.build_row_id(manifest.id, version, variant)
            if req.dry_run:
                return self._dry_run(manifest, source, build_id, variant, os_name)
            present = ctx.builds.get(manifest.id, version, variant) is not None
            waiting = _on_lock_wait(build_id, emit)
            async with ctx.build_lock(manifest.id, version, variant, waiting) as waited:
                existing = ctx.builds.get(manifest.id, version, variant)
                already = existing is not None and (not req.reinstall or waited)
                by_other = already and waited and not present
                if not already:
                    await source.build(emit)
                entry = ctx.builds.get(manifest.id, version, variant)
                assert entry is not None
        outcome = await self._finish(
            manifest,
            entry,
            req,
            already=already,
            by_other=by_other,
            emit=emit,
            auto=auto,
            first=first,
        )
        source.annotate(outcome, entry, already)
        return outcome

    def _dry_run(
        self, manifest: Manifest, source: BuildSource, build_id: str, variant: str, os_name: str
    ) -> InstallResult:
        """What would happen, or that nothing would; the source adds what it would fetch."""
        target = source.plan.target
        installed = self.ctx.builds.get(manifest.id, source.plan.version, variant) is not None
        if installed:
            head = (
                f"{build_id} is already installed in {target}; nothing to do "
                "(--reinstall redoes it)"
            )
        else:
            head = f"would install {build_id} into {target}"
        result = InstallResult(
            message=head,
            changed=False,
            id=build_id,
            component=manifest.id,
            version=source.plan.version,
            variant=variant,
            path=str(target / manifest.exe_for(os_name)),
            dir=str(target),
            activated=False,
            already_installed=installed,
            assets=[],
            dry_run=True,
        )
        source.dry_run(result)
        return result

    async def _finish(
        self,
        manifest: Manifest,
        entry: InstalledEntry,
        req: InstallRequest,
        *,
        already: bool,
        by_other: bool,
        emit: EventSink,
        auto: bool,
        first: bool,
    ) -> InstallResult:
        """Register a committed build, regenerate, and say what happened."""
        emit(ProgressEvent("registering"))
        with anyio.CancelScope(shield=True):  # committed: a cancel must not leave it unrecorded
            done = await self.activation.register(
                entry, activate=req.activate, auto=auto, first=first and auto
            )
        regen = await self.generator.after(req.generate)
        receipt = entry.receipt
        gpu = missing_gpu(entry.id, receipt.variant, receipt.capabilities)
        return InstallResult(
            message=_said(manifest, entry.id, done, already=already, by_other=by_other),
            changed=not (already and (done.was_active or not done.activated)),
            warnings=[gpu, *regen] if gpu and not already else regen,
            id=entry.id,
            component=manifest.id,
            version=receipt.version,
            variant=receipt.variant,
            path=str(entry.exe_path),
            activated=done.activated,
            already_installed=already,
            assets=[AssetInfo(**plain(a)) for a in receipt.assets],
            capabilities=receipt.capabilities,
        )


def _how(req: InstallRequest, locked: Locked) -> How:
    return How(
        smoke=req.smoke, refresh=req.refresh, require_checksum=req.require_checksum, locked=locked
    )


def _said(
    manifest: Manifest, build_id: str, done: Registered, *, already: bool, by_other: bool
) -> str:
    if by_other:
        head = f"another backendmgr installed {build_id} while this one waited"
    elif already:
        head = f"{build_id} is already installed"
    else:
        head = f"installed {build_id}"
    if done.activated and done.was_active:
        return f"{head}; it is the activated build" if not already else f"{head} and activated"
    if done.activated:
        message = f"{head}; this one activated it" if by_other else f"{head} and activated it"
        if not done.star and done.other_star:
            classes = ", ".join(sorted(classes_of(manifest.kind)))
            message += f", but {done.other_star} is the default for class {classes}"
        return message
    if done.newer:
        return f"{head}; {done.newer}, newer and installed meanwhile, is the activated build"
    return (
        f"{head}; {manifest.id} stays on its activated build; switch with "
        f'"backendmgr activate {build_id}"'
    )


def _on_lock_wait(build_id: str, emit: EventSink) -> Callable[[int | None], None]:
    """Tell the user whom an install waits for, instead of hanging silently."""

    def waiting(pid: int | None) -> None:
        who = f"another backendmgr (pid {pid})" if pid else "another backendmgr"
        emit(ProgressEvent("resolving", message=f"waiting for {who} installing {build_id}…"))

    return waiting
