"""Small facts several operations ask for, computed in one place: which build a component has
activated, which models pin a row, whether an executable is there, which installed build a
reference names, and the discovered models (with the GGUF header cache)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from ..config.models import Settings
from ..errors import InvalidInput, unknown
from ..registry.build_ids import build_id_of

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from ..config.models import BackendRow
    from ..discovery.models import Discovery
    from ..discovery.walk import Scan
    from ..install.builds import BuildStore
    from ..install.receipt import InstalledEntry
    from .context import Context

__all__ = [
    "activated_id",
    "build_identity",
    "discover",
    "executable_exists",
    "find_build",
    "local_names",
    "model_ids",
    "pinned_by",
]

GGUF_CACHE = "gguf-meta.json"


def activated_id(settings: Settings, component: str) -> str | None:
    """The build id the component's managed row points at, if it has one."""
    return build_id_of(settings.row(component))


def pinned_by(settings: Settings, row_id: str) -> list[str]:
    """The models pinned to ``row_id``, sorted."""
    return sorted(m for m, ov in settings.models.items() if ov.backend == row_id)


def executable_exists(path: str | None, *, on_path: bool = True) -> bool:
    """Whether ``path`` is there; a bare name counts only when PATH has it (``on_path``), as
    that is where a shell and llama-swap look for it: never a file in the current folder."""
    if not path:
        return False
    if os.sep not in path and "/" not in path:
        import shutil  # loaded here: its archive modules cost a read that never asks

        return on_path and shutil.which(path) is not None
    return Path(path).exists()


def build_identity(
    builds: BuildStore, environ: Mapping[str, str], row: BackendRow | None, exe: str
) -> str:
    """What an entry's executable is, for a record that must go stale when it changes (the
    ``verify`` cache, a tuned context): the receipt of a managed build, else path, size and
    mtime of the file ``exe`` names."""
    if row is not None and row.managed and row.component and row.version:
        installed = builds.get(row.component, row.version, row.variant)
        if installed is not None:
            from ..install.receipt import receipt_json

            return receipt_json(installed.receipt)
    import shutil

    found = shutil.which(exe, path=environ.get("PATH")) or exe
    try:
        st = os.stat(found)
    except OSError:
        return f"{found}:missing"
    return f"{found}:{st.st_size}:{st.st_mtime_ns}"


def find_build(builds: BuildStore, ref: str) -> InstalledEntry:
    """The installed build ``COMPONENT@VERSION-VARIANT`` (or ``@VERSION`` when only one
    variant of it is installed) names; a one-line error otherwise."""
    component, sep, rest = ref.partition("@")
    if not sep or not rest:
        raise unknown(
            f'"{ref}" is not a build',
            ref,
            [e.id for e in builds.installed()],
            hint='use COMPONENT@VERSION-VARIANT; see "backendmgr list"',
            always_hint=True,
            error=InvalidInput,
        )
    entries = builds.installed(component)
    exact = [e for e in entries if f"{e.receipt.version}-{e.receipt.variant}" == rest]
    if exact:
        return exact[0]
    by_version = [e for e in entries if e.receipt.version == rest]
    if len(by_version) == 1:
        return by_version[0]
    if len(by_version) > 1:
        names = ", ".join(e.id for e in by_version)
        raise InvalidInput(f"{ref} is ambiguous; name the variant: {names}")
    raise unknown(
        f"{ref} is not installed",
        ref,
        [e.id for e in builds.installed()],
        hint='see "backendmgr list"',
    )


def discover(
    settings: Settings,
    config: Path,
    cache_dir: Path,
    *,
    save: bool = True,
    keep: Callable[[str], bool] | None = None,
) -> tuple[Scan, Discovery]:
    """Scan ``models_dirs`` and read each model's header (cached by path, size and mtime;
    ``save=False`` leaves the cache file alone; ``keep``: the records of only the models whose
    id it accepts); blocking, for a worker thread."""
    from ..discovery.walk import discover as walk_discover
    from ..discovery.walk import scan_folders

    scan = scan_folders(_folders(settings, config))
    return scan, walk_discover(scan, cache_dir / GGUF_CACHE, save=save, keep=keep)


def model_ids(settings: Settings, config: Path, cache_dir: Path) -> list[str]:
    """The id of every model and skipped file in ``models_dirs``, as :func:`discover` names
    them; the header cache is read, never written (<TAB>)."""
    from ..discovery.walk import discover_ids, scan_folders

    return discover_ids(scan_folders(_folders(settings, config)), cache_dir / GGUF_CACHE)


def _folders(settings: Settings, config: Path) -> list[str]:
    """``models_dirs`` as the config means them (a relative one from the config's folder)."""
    from ..config.paths import as_config_means

    return [as_config_means(config, top) for top in settings.models_dirs]


def local_names(ctx: Context, kind: str) -> list[str]:
    """Ids from local state only (no network), for shell completion: ``components``,
    ``builds``, ``rows`` (or only those ``pin``, ``default``, ``backends remove`` take) or
    ``models``. Here, not in :mod:`.which`, so that <TAB> loads no planner, resolver nor
    result class."""
    if kind == "components":
        return ctx.component_ids()
    if kind == "builds":
        return [e.id for e in ctx.builds.installed()]
    settings = ctx.store.read()
    if kind == "rows":
        return [r.id for r in settings.backends]
    if kind == "pin_rows":  # what pin accepts
        from ..registry.rows import pin_problem

        return [r.id for r in settings.backends if pin_problem(r) is None]
    if kind == "default_rows":  # what default accepts
        from ..registry.rows import default_problem

        return [r.id for r in settings.backends if default_problem(r) is None]
    if kind == "manual_rows":  # what backends remove accepts
        return [r.id for r in settings.backends if not (r.managed or r.build)]
    if kind == "models":  # ids only (no model's header read into a record); writes nothing
        return sorted(
            set(model_ids(settings, ctx.store.path, ctx.paths.cache)) | set(settings.models)
        )
    raise InvalidInput(f'unknown kind of name "{kind}"')
