"""Hostile archives against the unpack that looks nothing up on disk under an empty staging
folder (issue 34): whatever the archive does with links, hard links, duplicate names and
``..``, the install either refuses in one line or installs a build that holds nothing leading
outside it, and nothing outside the build is ever written."""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable
from pathlib import Path

import pytest

from backendmgr.mirror import MirrorServer
from tests.support import Entry, make_tar, make_zip, publish
from tests.support.cli import Cli, CliResult

SCRIPT = b"#!/bin/sh\necho tool 1.0\n"


def manifest(config_path: Path, patterns: str) -> None:
    folder = config_path.parent / "manifests"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "tool.yaml").write_text(
        "id: tool\nkind: custom\nsource: {type: github, repo: me/tool}\n"
        f"exe: {{default: tool}}\nvariants: [{{id: cpu, assets: {{linux-x64: [{patterns}]}}}}]\n"
    )


def outside_files(tmp_path: Path) -> list[str]:
    """Every file under ``tmp_path`` that is not the installer's home, the mirror or the config
    (the build's own links are checked by :func:`links_stay_inside`)."""
    found = []
    for folder, dirs, files in os.walk(tmp_path):
        rel = Path(folder).relative_to(tmp_path)
        if rel.parts[:1] in (("home",), ("mirror",), ("cfg",)):
            dirs.clear()
            continue
        found += [str(rel / f) for f in files]
    return sorted(found)


def links_stay_inside(build: Path) -> None:
    real_build = os.path.realpath(build)
    for folder, dirs, files in os.walk(build):
        for name in dirs + files:
            real = os.path.realpath(Path(folder) / name)
            assert os.path.commonpath([real, real_build]) == real_build, (folder, name)


def link(name: str, target: str) -> Entry:
    return Entry(name, kind="symlink", target=target)


def hard(name: str, target: str) -> Entry:
    return Entry(name, kind="hardlink", target=target)


OUT = "../../../../../outside"  # from <staging>/tool: <tmp_path>/outside
ATTACKS: dict[str, list[Entry]] = {
    "relative link out, then through it": [link("tool/a", OUT), Entry("tool/a/evil", b"x")],
    "link to the root, then through it": [link("tool/a", ".."), Entry("tool/a/evil", b"x")],
    "link, then a folder of its name": [
        link("tool/d", "bin"),
        Entry("tool/d/", kind="dir", mode=0o755),
        Entry("tool/d/f", b"x"),
    ],
    "folder, then a link of its name out": [Entry("tool/d/f", b"x"), link("tool/d", OUT)],
    "file, then a link of its name": [Entry("tool/x", b"x"), link("tool/x", "bin/tool")],
    "link, then a file of its name": [link("tool/x", "bin/tool"), Entry("tool/x", b"overwrite")],
    "hard link to a later member": [hard("tool/h", "tool/later"), Entry("tool/later", b"later")],
    "hard link through a link to the root": [
        link("tool/up", ".."),
        hard("tool/h", "tool/up/tool/bin/tool"),
    ],
    "hard link to a link out of a link chain": [
        link("tool/s", "."),
        link("tool/t", "s/s/.."),
        hard("tool/h", "tool/t/t/t/evil"),
    ],
    "a link chain that climbs past the root": [
        link("tool/s", "."),
        link("tool/t", "s/../s/../.."),
        Entry("tool/t/evil", b"x"),
    ],
    "a file then a link replacing its folder": [
        Entry("tool/lib/inner", b"x"),
        link("tool/lib", "../.."),
    ],
    "file, then a folder of its name": [Entry("tool/f", b"x"), Entry("tool/f/g", b"y")],
    "folder, then a file of its name": [Entry("tool/f/g", b"y"), Entry("tool/f", b"x")],
    "a link to itself and a loop": [link("tool/a", "a"), link("tool/b", "c"), link("tool/c", "b")],
    "a hard link to itself": [hard("tool/h", "tool/h")],
    "a member named like the staging folder": [
        Entry("v1-cpu.staging-x/evil", b"x"),
        link("tool/up", "../v1-cpu.staging-x"),
    ],
}
REFUSED_BY_NAME: dict[str, list[Entry]] = {
    "absolute link": [link("tool/a", "/tmp"), Entry("tool/a/e", b"x")],
    "hard link out": [hard("tool/h", "../../../etc/passwd")],
    "absolute hard link": [hard("tool/h", "/etc/passwd")],
    "dot-dot member": [Entry("tool/../../../../../outside/evil", b"x")],
    "absolute member": [Entry("/tmp/evil-backendmgr-attack", b"x")],
}


Release = Callable[[dict[str, bytes]], CliResult]


@pytest.fixture
def release(
    cli: Cli, mirror: MirrorServer, mirror_root: Path, tmp_path: Path, config_path: Path
) -> Release:
    """Publish one release of ``tool`` (its assets by name, each matched by its own pattern)
    and install it; nothing outside the home may be written, whatever the outcome."""

    def install(assets: dict[str, bytes]) -> CliResult:
        (tmp_path / "outside").mkdir()
        patterns = ", ".join(f"'{name.split('.')[0]}\\..+'" for name in assets)
        manifest(config_path, patterns)
        publish(mirror_root, "me/tool", "v1", assets)
        result = cli("install", "tool")
        assert outside_files(tmp_path) == []
        return result

    return install


def _archive(fmt: str, entries: list[Entry]) -> bytes:
    full = [Entry("tool/bin/tool", SCRIPT, mode=0o755), *entries]
    if fmt == "zip":
        with warnings.catch_warnings():  # zipfile warns as it writes a repeated name
            warnings.simplefilter("ignore", UserWarning)
            return make_zip(full)
    return make_tar(full, "" if fmt == "tar" else "gz")


def _cases() -> list[tuple[str, str]]:
    """Every attack in every format that can hold it (a zip has no hard links)."""
    attacks = {**ATTACKS, **REFUSED_BY_NAME}
    return [
        (attack, fmt)
        for attack in sorted(attacks)
        for fmt in ("tar.gz", "zip", "tar")
        if not (fmt == "zip" and any(e.kind == "hardlink" for e in attacks[attack]))
    ]


@pytest.mark.parametrize(("attack", "fmt"), _cases())
def test_hostile_members_never_write_outside(
    release: Release, tmp_path: Path, fmt: str, attack: str
) -> None:
    entries = ATTACKS.get(attack) or REFUSED_BY_NAME[attack]
    result = release({f"tool-linux-x64.{fmt}": _archive(fmt, entries)})
    assert not Path("/tmp/evil-backendmgr-attack").exists()
    builds = tmp_path / "home" / "builds" / "tool"
    if result.code == 0:
        assert attack not in REFUSED_BY_NAME, attack
        build = builds / "v1-cpu"
        links_stay_inside(build)
        assert (build / "tool" / "bin" / "tool").read_bytes() == SCRIPT
    else:
        errors = [line for line in result.err.splitlines() if line.startswith("error")]
        assert len(errors) == 1 and result.err.endswith(errors[0] + "\n"), result.err
        assert not builds.exists() or os.listdir(builds) == [], os.listdir(builds)


@pytest.mark.parametrize("fmt", ["tar.gz", "zip"])
def test_a_second_asset_cannot_write_through_the_first_ones_link(
    release: Release, tmp_path: Path, fmt: str
) -> None:
    """The first asset's link (inside its own tree, into a folder the second names) and the
    second asset's member through it: written where the link leads, inside the build."""
    first = _archive(fmt, [link("tool/lib", "..")])
    build = make_zip if fmt == "zip" else make_tar
    second = build([Entry("tool/lib/tool/lib/tool/lib/evil", b"x"), Entry("tool/lib2/x", b"y")])
    result = release({f"tool-linux-x64.{fmt}": first, f"extra-linux-x64.{fmt}": second})
    if result.code == 0:
        links_stay_inside(tmp_path / "home" / "builds" / "tool" / "v1-cpu")
