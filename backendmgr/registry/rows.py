"""Managed, build and manual rows, and the ★ rules (SPEC §3.2).

Every function takes the current rows and returns new ones; nothing here reads a disk. Callers
hand in what they learned from the disk (installed builds, which paths exist).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from ..config.models import BackendRow, row_id_problem
from ..errors import BackendmgrError, InvalidInput, MalformedId, Refused, unknown
from .build_ids import build_id_of, build_row_id
from .kinds import KNOWN_KINDS, class_taken, classes_of, normalize_kind

if TYPE_CHECKING:
    from .installed import InstalledBuild

__all__ = [
    "add_manual",
    "adopt",
    "build_id_of",
    "build_row_id",
    "default_problem",
    "pin_problem",
    "pin_target",
    "remove_manual",
    "set_default",
    "sync_build_rows",
    "unknown_row",
    "upsert_managed",
]


def _find(rows: Sequence[BackendRow], row_id: str) -> int | None:
    return next((i for i, row in enumerate(rows) if row.id == row_id), None)


def unknown_row(rows: Sequence[BackendRow], row_id: str) -> BackendmgrError:
    """The error for a row id that is not in the registry, with the nearest ids."""
    return unknown(
        f'no backend row "{row_id}"',
        row_id,
        [r.id for r in rows],
        hint='see "backendmgr backends"',
    )


def add_manual(
    rows: Sequence[BackendRow],
    row: BackendRow,
    *,
    catalog_ids: Iterable[str],
    make_default: bool = False,
) -> list[BackendRow]:
    """Append a row the user typed in; it takes ★ only when asked to."""
    problem = row_id_problem(row.id)  # again here, whatever kind of row it was made as
    if problem is not None:
        raise MalformedId(problem)
    if "@" in row.id:
        raise InvalidInput(f'row id "{row.id}" may not contain "@" (that names an installed build)')
    # by case too: "LLAMA-SERVER" beside llama-server, or "MyRow" beside myrow, would be two
    # rows a reader takes for one, and pin tells them apart
    folded = row.id.casefold()
    catalog = next((c for c in catalog_ids if c.casefold() == folded), None)
    if catalog is not None:
        same = "" if catalog == row.id else f' (as "{catalog}")'
        raise InvalidInput(
            f'"{row.id}" is a catalog component id{same}; choose another id for a manual row'
        )
    taken = next((r.id for r in rows if r.id.casefold() == folded), None)
    if taken is not None:  # state, not a typo: 1
        same = "" if taken == row.id else f' (as "{taken}", in other case)'
        raise Refused(f'a backend row "{row.id}" already exists{same}')
    if normalize_kind(row.kind) not in KNOWN_KINDS:
        raise unknown(
            f'unknown kind "{row.kind}"',
            normalize_kind(row.kind),
            KNOWN_KINDS,
            hint=f"known kinds: {', '.join(KNOWN_KINDS)}",
            always_hint=True,
            error=InvalidInput,
        )
    manual = replace(
        row, managed=False, build=False, component="", version="", variant="", default=False
    )
    out = [*rows, manual]
    return set_default(out, manual.id) if make_default else out


def pin_problem(row: BackendRow) -> str | None:
    """Why a model cannot be pinned to ``row`` (llama-swap's kindless row records an activated
    build, nothing more), or None: one rule for ``pin`` and its completion."""
    if not normalize_kind(row.kind):
        return f'"{row.id}" serves no model; pin the model to a backend row instead'
    return None


def default_problem(row: BackendRow) -> str | None:
    """Why ``row`` cannot take ★, or None: one rule for ``default`` and its completion."""
    if row.build:
        return (
            f'"{row.id}" is a build row and cannot be the default; activate it or pin a model to it'
        )
    if not normalize_kind(row.kind):
        return f'"{row.id}" serves no model; it is not a backend a model can use'
    if not classes_of(row.kind):
        return f'"{row.id}" has kind "{row.kind}", which serves no class; pin models to it instead'
    return None


def pin_target(rows: Sequence[BackendRow], row_id: str) -> BackendRow:
    """The row a model may be pinned to: in the registry, and serving models."""
    index = _find(rows, row_id)
    if index is None:
        raise unknown_row(rows, row_id)
    problem = pin_problem(rows[index])
    if problem is not None:
        raise Refused(problem)
    return rows[index]


def remove_manual(rows: Sequence[BackendRow], row_id: str) -> list[BackendRow]:
    index = _find(rows, row_id)
    if index is None:
        raise unknown_row(rows, row_id)
    row = rows[index]
    if row.managed or row.build:
        raise Refused(f'"{row_id}" is managed by the installer; use "backendmgr uninstall"')
    return [r for i, r in enumerate(rows) if i != index]


def set_default(rows: Sequence[BackendRow], row_id: str) -> list[BackendRow]:
    """★ the row for every class its kind serves, clearing ★ from the others in those classes."""
    index = _find(rows, row_id)
    if index is None:
        raise unknown_row(rows, row_id)
    target = rows[index]
    problem = default_problem(target)
    if problem is not None:
        raise Refused(problem)
    classes = classes_of(target.kind)
    out: list[BackendRow] = []
    for i, row in enumerate(rows):
        if i == index:
            out.append(row if row.default else replace(row, default=True))
        elif row.default and classes_of(row.kind) & classes:
            out.append(replace(row, default=False))
        else:
            out.append(row)
    return out


def upsert_managed(
    rows: Sequence[BackendRow], build: InstalledBuild
) -> tuple[list[BackendRow], bool]:
    """Point the component's managed row at ``build``, creating the row when it is missing.

    Returns the rows and whether the row is ★. An existing row keeps its id, place and ★; a new
    row is appended and takes ★ only when its classes are empty: an install never steals ★.
    """
    index = _find(rows, build.component)
    row = BackendRow(  # the managed row as the build says it; an existing row keeps id and ★
        id=build.component,
        path=build.exe,
        component=build.component,
        version=build.version,
        variant=build.variant,
        kind=build.kind,
        name=build.name,
        managed=True,
    )
    if index is not None:
        current = rows[index]
        if not current.managed:
            raise Refused(
                f'a manual row named "{build.component}" is in the way of the installed '
                f'component; rename or remove it with "backendmgr backends remove"'
            )
        updated = replace(row, id=current.id, default=current.default)
        out = list(rows)
        out[index] = updated
        return out, updated.default
    takes_star = bool(classes_of(build.kind)) and not class_taken(rows, build.kind)
    row = replace(row, default=takes_star)
    return [*rows, row], takes_star


def sync_build_rows(
    rows: Sequence[BackendRow], component: str, builds: Iterable[InstalledBuild]
) -> list[BackendRow]:
    """One block of build rows, newest first, directly behind the component's managed row."""
    from .installed import newest_first

    rest = [r for r in rows if not (r.build and r.component == component)]
    block = [
        BackendRow(
            id=b.build_id,
            kind=b.kind,
            name=b.name,
            path=b.exe,
            managed=True,
            component=b.component,
            version=b.version,
            variant=b.variant,
            build=True,
        )
        for b in newest_first(b for b in builds if b.component == component)
    ]
    anchor = next(
        (i for i, r in enumerate(rest) if r.managed and not r.build and r.id == component), None
    )
    if anchor is None:
        return [*rest, *block]
    return [*rest[: anchor + 1], *block, *rest[anchor + 1 :]]


def adopt(
    rows: Sequence[BackendRow],
    installed: Mapping[str, Sequence[InstalledBuild]],
    *,
    path_exists: Callable[[str], bool],
) -> list[BackendRow]:
    """Bring the registry in line with the builds on disk.

    A missing managed row is created for the newest build; one whose executable is gone is
    repointed (id and ★ kept); one whose path works is never moved. Build rows mirror the disk.
    """
    out = list(rows)
    components = list(installed)
    components += sorted(
        {r.component for r in out if r.build and r.component and r.component not in installed}
    )
    for component in components:
        from .installed import newest_first  # only where a build is, or a build row was

        builds = newest_first(installed.get(component, ()))
        if builds:
            index = _find(out, component)
            current = out[index] if index is not None else None
            if current is None or (current.managed and not path_exists(current.path)):
                out, _ = upsert_managed(out, builds[0])
        out = sync_build_rows(out, component, builds)
    return out
