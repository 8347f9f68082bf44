from __future__ import annotations

from datetime import UTC, datetime

import pytest

from backendmgr.config.models import BackendRow
from backendmgr.errors import InvalidInput, NotFound, Refused
from backendmgr.registry.installed import InstalledBuild
from backendmgr.registry.rows import (
    add_manual,
    adopt,
    remove_manual,
    set_default,
    sync_build_rows,
    upsert_managed,
)

CATALOG = ["llama-server", "sd-server", "upscaler", "vllm", "audiocpp"]


def row(rid: str, kind: str, *, default: bool = False, **kw: object) -> BackendRow:
    return BackendRow(id=rid, kind=kind, path=f"/bin/{rid}", default=default, **kw)  # type: ignore[arg-type]


def build(
    version: str,
    variant: str = "vulkan",
    component: str = "llama-server",
    kind: str = "llama",
    at: int = 0,
) -> InstalledBuild:
    return InstalledBuild(
        component=component,
        version=version,
        variant=variant,
        kind=kind,
        exe=f"/home/builds/{component}/{version}-{variant}/{component}",
        installed_at=datetime.fromtimestamp(1_700_000_000 + at, UTC),
    )


def ids(rows: list[BackendRow]) -> list[str]:
    return [r.id for r in rows]


def stars(rows: list[BackendRow]) -> list[str]:
    return [r.id for r in rows if r.default]


# --- managed rows and ★ ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("existing", "new_kind", "takes_star"),
    [
        ([], "llama", True),  # empty class → ★
        ([row("mine", "llama")], "llama", False),  # appended behind a manual row: no ★
        ([row("mine", "vllm")], "llama", False),  # same class through another kind
        ([row("mine", "sd")], "llama", True),  # another class does not count
        ([row("p", "parakeet")], "audiocpp", False),  # parakeet keeps audio.cpp off the tts ★
        ([row("c", "custom")], "llama", True),
        ([], "custom", False),  # no class, nothing to be default of
    ],
)
def test_new_managed_row_star(existing: list[BackendRow], new_kind: str, takes_star: bool) -> None:
    b = build("b100", component="comp", kind=new_kind)
    rows, star = upsert_managed(existing, b)
    assert star is takes_star
    assert rows[-1].id == "comp" and rows[-1].managed and rows[-1].default is takes_star
    assert ids(rows) == [*ids(existing), "comp"]


def test_install_never_steals_star() -> None:
    rows, _ = upsert_managed([row("mine", "llama", default=True)], build("b1"))
    assert stars(rows) == ["mine"]


def test_activation_keeps_id_place_and_star() -> None:
    rows, _ = upsert_managed([], build("b100"))
    rows = [row("other", "sd"), *rows]
    rows, star = upsert_managed(rows, build("b200", "cuda"))
    assert star is True
    assert ids(rows) == ["other", "llama-server"]
    managed = rows[1]
    assert (managed.version, managed.variant, managed.default) == ("b200", "cuda", True)
    assert managed.path.endswith("b200-cuda/llama-server")


def test_upsert_refuses_manual_row_with_component_id() -> None:
    with pytest.raises(Refused, match="manual row"):
        upsert_managed([row("llama-server", "llama")], build("b1"))


# --- build rows -----------------------------------------------------------------------------


def test_build_rows_block_sits_behind_managed_row_newest_first() -> None:
    rows, _ = upsert_managed([row("mine", "llama")], build("b982"))
    rows = [*rows, row("sd", "sd")]
    builds = [build("b982"), build("b9100"), build("b10800", "rocm"), build("b9100", "cuda", at=5)]
    rows = sync_build_rows(rows, "llama-server", builds)
    assert ids(rows) == [
        "mine",
        "llama-server",
        "llama-server@b10800-rocm",
        "llama-server@b9100-cuda",  # same version: newer install first
        "llama-server@b9100-vulkan",
        "llama-server@b982-vulkan",
        "sd",
    ]
    assert all(r.build and r.managed and not r.default for r in rows[2:6])


def test_pypi_versions_order_by_packaging() -> None:
    builds = [
        build(v, "cuda", component="vllm", kind="vllm") for v in ("0.9.2", "0.10.1", "0.10.1rc1")
    ]
    rows, _ = upsert_managed([], builds[0])
    rows = sync_build_rows(rows, "vllm", builds)
    assert ids(rows)[1:] == ["vllm@0.10.1-cuda", "vllm@0.10.1rc1-cuda", "vllm@0.9.2-cuda"]


def test_resync_is_idempotent_and_drops_removed_builds() -> None:
    rows, _ = upsert_managed([], build("b1"))
    first = sync_build_rows(rows, "llama-server", [build("b1"), build("b2")])
    assert sync_build_rows(first, "llama-server", [build("b1"), build("b2")]) == first
    pruned = sync_build_rows(first, "llama-server", [build("b2")])
    assert ids(pruned) == ["llama-server", "llama-server@b2-vulkan"]


def test_build_rows_without_managed_row_go_last() -> None:
    rows = sync_build_rows([row("a", "llama")], "llama-server", [build("b1")])
    assert ids(rows) == ["a", "llama-server@b1-vulkan"]


# --- default ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rows", "target", "expected_stars"),
    [
        ([row("a", "llama", default=True), row("b", "vllm")], "b", ["b"]),
        (
            [row("a", "llama", default=True), row("s", "sd", default=True), row("b", "llama")],
            "b",
            ["s", "b"],
        ),
        # audio.cpp serves tts and asr: it clears the ★ of both classes.
        (
            [
                row("t", "kokoro", default=True),
                row("p", "parakeet", default=True),
                row("x", "audiocpp"),
            ],
            "x",
            ["x"],
        ),
        ([row("x", "audiocpp", default=True), row("p", "parakeet")], "p", ["p"]),
        ([row("a", "llama", default=True)], "a", ["a"]),
    ],
)
def test_set_default(rows: list[BackendRow], target: str, expected_stars: list[str]) -> None:
    assert stars(set_default(rows, target)) == expected_stars


@pytest.mark.parametrize(
    ("rows", "target", "error"),
    [
        ([row("a", "llama")], "zzz", NotFound),
        (
            [row("llama-server@b1-vulkan", "llama", build=True, managed=True)],
            "llama-server@b1-vulkan",
            Refused,
        ),
        ([row("c", "custom")], "c", Refused),
    ],
)
def test_set_default_refusals(rows: list[BackendRow], target: str, error: type[Exception]) -> None:
    with pytest.raises(error):
        set_default(rows, target)


# --- manual rows ---------------------------------------------------------------------------


def test_add_manual_appends_and_takes_star_only_when_asked() -> None:
    rows = add_manual([row("a", "llama", default=True)], row("b", "llama"), catalog_ids=CATALOG)
    assert ids(rows) == ["a", "b"] and stars(rows) == ["a"]
    rows = add_manual(rows, row("c", "vllm"), catalog_ids=CATALOG, make_default=True)
    assert stars(rows) == ["c"]


def test_add_manual_clears_installer_fields() -> None:
    sneaky = row("x", "llama", managed=True, build=True, component="c", version="1", variant="v")
    added = add_manual([], sneaky, catalog_ids=CATALOG)[0]
    assert (added.managed, added.build, added.component, added.version) == (False, False, "", "")


@pytest.mark.parametrize(
    ("rid", "message", "error"),
    [
        ("a", "already exists", Refused),  # the state: exit 1
        ("x@1", 'may not contain "@"', InvalidInput),  # typed wrong: exit 2
        ("vllm", "catalog component", InvalidInput),
        ("A", r'already exists \(as "a", in other case\)', Refused),
        ("VLLM", r'catalog component id \(as "vllm"\)', InvalidInput),
    ],
)
def test_add_manual_refusals(rid: str, message: str, error: type[Exception]) -> None:
    with pytest.raises(error, match=message):
        add_manual([row("a", "llama")], row(rid, "llama"), catalog_ids=CATALOG)


def test_remove_manual() -> None:
    managed, _ = upsert_managed([row("a", "llama")], build("b1"))
    assert ids(remove_manual(managed, "a")) == ["llama-server"]
    with pytest.raises(Refused, match="uninstall"):
        remove_manual(managed, "llama-server")
    with pytest.raises(NotFound):
        remove_manual(managed, "zzz")


# --- adoption ------------------------------------------------------------------------------


def test_adopt_creates_missing_managed_row_for_newest_build() -> None:
    rows = adopt([], {"llama-server": [build("b1"), build("b3")]}, path_exists=lambda p: True)
    assert ids(rows) == ["llama-server", "llama-server@b3-vulkan", "llama-server@b1-vulkan"]
    assert rows[0].version == "b3" and rows[0].default


def test_adopt_repairs_dead_path_keeping_id_and_star() -> None:
    rows, _ = upsert_managed([row("m", "sd")], build("b1"))
    rows = [rows[1], rows[0]]  # user moved the managed row first
    repaired = adopt(rows, {"llama-server": [build("b2")]}, path_exists=lambda p: "b1" not in p)
    assert ids(repaired) == ["llama-server", "llama-server@b2-vulkan", "m"]
    assert repaired[0].version == "b2" and repaired[0].default


def test_adopt_never_moves_a_working_managed_row() -> None:
    rows, _ = upsert_managed([], build("b1"))
    adopted = adopt(rows, {"llama-server": [build("b1"), build("b2")]}, path_exists=lambda p: True)
    assert adopted[0].version == "b1"
    assert ids(adopted)[1:] == ["llama-server@b2-vulkan", "llama-server@b1-vulkan"]


def test_adopt_new_row_respects_populated_class() -> None:
    rows = adopt(
        [row("mine", "llama", default=True)],
        {"llama-server": [build("b1")]},
        path_exists=lambda p: True,
    )
    assert stars(rows) == ["mine"]


def test_adopt_prunes_build_rows_of_vanished_builds_and_is_stable() -> None:
    rows = adopt([], {"llama-server": [build("b1"), build("b2")]}, path_exists=lambda p: True)
    rows = adopt(rows, {}, path_exists=lambda p: True)
    assert ids(rows) == ["llama-server"]
    assert adopt(rows, {}, path_exists=lambda p: True) == rows


def test_adopt_leaves_manual_row_named_like_component_alone() -> None:
    rows = adopt(
        [row("llama-server", "llama")], {"llama-server": [build("b1")]}, path_exists=lambda p: True
    )
    assert rows[0].managed is False and rows[0].path == "/bin/llama-server"
