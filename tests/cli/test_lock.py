"""lock, sync and fetch: two homes stand for two machines, both installing from the loopback
mirror (or from a folder that ``fetch`` filled and a second mirror serves)."""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from backendmgr.mirror import MirrorServer
from tests.support import (
    DownloadGates,
    Entry,
    llama_entries,
    make_tar,
    publish,
    publish_llama,
    spawn_backendmgr,
    tree,
    wait_until,
)
from tests.support.cli import Cli, CliResult
from tests.support.ggufs import write_gguf
from tests.support.wheels import TOY_MANIFEST as MANIFEST
from tests.support.wheels import make_wheel

VULKAN = "llama-{tag}-bin-ubuntu-vulkan-x64.tar.gz"


class Machine:
    """One machine: its own config file and data home, driven through the real CLI."""

    def __init__(self, cli: Cli, root: Path, models: Path | None = None) -> None:
        self.cli = cli
        self.config = root / "cfg" / "config.yaml"
        self.home = root / "home"
        self.lock = self.config.parent / "backendmgr.lock"
        if models is not None:
            self.config.parent.mkdir(parents=True, exist_ok=True)
            self.config.write_text(json.dumps({"models_dirs": [str(models)]}))

    @property
    def flags(self) -> list[str]:
        return ["--config", str(self.config), "--home", str(self.home)]

    def __call__(self, *args: str) -> CliResult:
        return self.cli(*self.flags, *args)

    def ok(self, *args: str) -> CliResult:
        result = self(*args)
        assert result.code == 0, result
        assert "Traceback" not in result.err
        return result

    def refused(self, needle: str, *args: str, code: int = 1) -> str:
        result = self(*args)
        assert result.code == code, result
        errors = [line for line in result.err.splitlines() if line.startswith("error:")]
        assert len(errors) == 1 and "Traceback" not in result.err, result.err
        assert needle in errors[0], errors[0]
        return errors[0]

    def json(self, *args: str) -> object:
        return json.loads(self.ok("--json", *args).out)

    def builds(self) -> dict[str, tuple[bool, list[str]]]:
        """Build id → (activated, every asset's SHA-256 from its receipt)."""
        out = {}
        for row in self.json("list"):  # type: ignore[union-attr]
            receipt = json.loads((Path(row["dir"]) / ".backendmgr.json").read_text())
            out[row["id"]] = (row["activated"], [a["sha256"] for a in receipt["assets"]])
        return out

    def state(self) -> tuple[list[str], str, str]:
        """Everything a refused sync must leave alone."""
        builds = tree(self.home / "builds") if (self.home / "builds").exists() else []
        config = self.config.read_text() if self.config.exists() else ""
        out = self.config.parent / "llama-swap.yaml"
        return builds, config, out.read_text() if out.exists() else ""


@pytest.fixture
def models(tmp_path: Path) -> Path:
    root = tmp_path / "models"
    write_gguf(root / "qwen3-8b.gguf", "qwen3", layers=4, ctx=4096)
    return root


@pytest.fixture(autouse=True)
def _quiet_mirror(request: pytest.FixtureRequest) -> None:
    """The CLI runs in this process, so the mirror's thread would print a dropped connection's
    traceback into the captured stderr that the tests check for tracebacks of backendmgr."""
    if "mirror" in request.fixturenames:
        server = request.getfixturevalue("mirror")
        server.handle_error = lambda request, client_address: None


@pytest.fixture
def two(cli: Cli, tmp_path: Path, models: Path) -> tuple[Machine, Machine]:
    return Machine(cli, tmp_path / "a", models), Machine(cli, tmp_path / "b", models)


def downloads(server: MirrorServer) -> list[str]:
    return [path for path, _ in server.requests if path.startswith("/download/")]


def locked_on_a(a: Machine, mirror_root: Path) -> dict[str, bytes]:
    """Machine a: b100 (activated) and b101 installed, then locked."""
    first = publish_llama(mirror_root, "b100", published_at="2026-09-01T00:00:00Z")
    second = publish_llama(mirror_root, "b101", published_at="2026-09-02T00:00:00Z")
    a.ok("install", "llama-server", "b100")
    a.ok("install", "llama-server", "b101")
    a.ok("lock")
    return {**first, **second}


# --- lock on one machine, sync on another ----------------------------------------------------


def test_lock_then_sync_gives_the_same_builds(
    two: tuple[Machine, Machine], mirror: MirrorServer, mirror_root: Path
) -> None:
    a, b = two
    assets = locked_on_a(a, mirror_root)
    text = a.lock.read_text()
    assert text.startswith("# backendmgr.lock")
    assert "format: 1\n" in text
    assert "activated:\n  llama-server: llama-server@b100-vulkan\n" in text
    assert text.index("llama-server@b100-vulkan\n    component") < text.index(
        "llama-server@b101-vulkan\n    component"
    )
    for name, data in assets.items():
        assert f"name: {name}" in text and hashlib.sha256(data).hexdigest() in text
    again = a.json("lock")
    assert again["changed"] is False and a.lock.read_text() == text  # type: ignore[index]

    mirror.requests.clear()
    synced = b.json("sync", str(a.lock))
    assert synced["install"] == ["llama-server@b100-vulkan", "llama-server@b101-vulkan"]  # type: ignore[index]
    assert len(downloads(mirror)) == 2
    assert b.builds() == a.builds()
    assert b.builds()["llama-server@b100-vulkan"][0] is True

    def generated(m: Machine) -> str:
        text = (m.config.parent / "llama-swap.yaml").read_text()
        text = text.replace(str(m.home), "HOME").replace(str(m.config.parent), "CFG")
        # the inputs' hash covers the paths too
        return "\n".join(x for x in text.splitlines() if not x.startswith("# inputs: "))

    assert "qwen3-8b" in generated(b)
    assert generated(b) == generated(a)
    b_lock = b.config.parent / "mine.lock"
    b.ok("lock", "--output", str(b_lock))
    assert b_lock.read_text() == text  # the same builds are the same lock, byte for byte

    mirror.requests.clear()
    second = b.ok("sync", str(a.lock))
    assert "already matches" in second.out and "nothing to do" in second.out
    assert downloads(mirror) == []
    assert b.json("sync", str(a.lock))["changed"] is False  # type: ignore[index]


def test_sync_activates_the_locked_build_and_dry_run_changes_nothing(
    two: tuple[Machine, Machine], mirror: MirrorServer, mirror_root: Path
) -> None:
    a, b = two
    locked_on_a(a, mirror_root)
    b.ok("install", "llama-server", "b101")  # activated here, but the lock says b100
    before = b.state()
    dry = b.json("sync", str(a.lock), "--dry-run")
    assert dry == {  # type: ignore[comparison-overlap]
        "lock": str(a.lock),
        "install": ["llama-server@b100-vulkan"],
        "reinstall": [],
        "activate": ["llama-server@b100-vulkan"],
        "remove": [],
        "kept": [],
        "dry_run": True,
        "changed": False,
        "message": f"sync with {a.lock}: would install llama-server@b100-vulkan; would activate "
        "llama-server@b100-vulkan",
    }
    assert b.state() == before
    done = b.ok("sync", str(a.lock))
    assert "installed llama-server@b100-vulkan; activated llama-server@b100-vulkan" in done.out
    assert b.builds() == a.builds()


# --- tampering ---------------------------------------------------------------------------------


@pytest.mark.parametrize("digest", ["the lock's", "the server's own", "none"])
def test_other_bytes_are_refused_whatever_the_server_says(
    two: tuple[Machine, Machine], mirror: MirrorServer, mirror_root: Path, digest: str
) -> None:
    a, b = two
    assets = locked_on_a(a, mirror_root)
    name = VULKAN.format(tag="b101")
    locked_sha = hashlib.sha256(assets[name]).hexdigest()
    evil = make_tar([*llama_entries("b101"), Entry("build/bin/backdoor", b"evil", mode=0o755)])
    (mirror_root / "ggml-org/llama.cpp/b101" / name).write_bytes(evil)
    original = mirror.releases

    def lying(owner: str, repo: str) -> list[dict[str, object]] | None:
        listing = original(owner, repo)
        for release in listing or []:
            for asset in release["assets"]:  # type: ignore[attr-defined]
                if asset["name"] == name:
                    asset["digest"] = {
                        "the lock's": f"sha256:{locked_sha}",
                        "the server's own": asset["digest"],
                        "none": None,
                    }[digest]
        return listing

    mirror.releases = lying  # type: ignore[method-assign]
    result = b("sync", str(a.lock))
    assert result.code == 1, result
    (line,) = [x for x in result.err.splitlines() if x.startswith("error:")]
    assert line.startswith("error: llama-server@b101-vulkan: ") and "nothing was installed" in line
    if digest == "the server's own":  # refused before downloading, naming both digests
        assert f"sha256:{hashlib.sha256(evil).hexdigest()}" in line and locked_sha in line
    builds = b.home / "builds" / "llama-server"
    assert sorted(p.name for p in builds.iterdir()) == ["b100-vulkan"]  # the good one went in
    assert list((b.home / "downloads").glob("*.part")) == []
    assert "llama-server@b101-vulkan" not in b.builds()


def test_a_lock_edited_with_a_wrong_hash_is_refused(
    two: tuple[Machine, Machine], mirror: MirrorServer, mirror_root: Path
) -> None:
    a, b = two
    assets = locked_on_a(a, mirror_root)
    real = hashlib.sha256(assets[VULKAN.format(tag="b100")]).hexdigest()
    edited = b.config.parent / "edited.lock"
    edited.parent.mkdir(parents=True, exist_ok=True)
    edited.write_text(a.lock.read_text().replace(real, "ab" * 32))
    line = b.refused("the lock says sha256:" + "ab" * 32, "sync", str(edited))
    assert line.startswith("error: llama-server@b100-vulkan: ") and f"sha256:{real}" in line
    assert sorted(b.builds()) == ["llama-server@b101-vulkan"]  # the other build is fine
    assert not (b.home / "builds" / "llama-server" / "b100-vulkan").exists()


HOSTILE_LOCKS = {
    "not yaml": ("format: [1\n", "edited.lock"),
    "alias bomb": (
        "a: &a [x, x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
        "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c]\n"
        "e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\nf: [*e, *e, *e]\n",
        "aliases expand",
    ),
    "format": ("format: 9\nbuilds: []\n", "lock format 9 is not 1"),
    "unknown key": ("format: 1\nbuilds: []\nsecret: 1\n", "secret: unknown key"),
    "traversal": ("ASSET", "cannot be a file or folder name"),
    "short hash": ("SHORT", "sha256 must be 64 lowercase hex digits"),
    "id": ("ID", "does not match its fields"),
    "activated": ("ACTIVE", "is not among the builds"),
    "binary": ("\udcff", "not UTF-8"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE_LOCKS))
def test_hostile_lock_files_are_one_line_errors(
    two: tuple[Machine, Machine], mirror: MirrorServer, mirror_root: Path, case: str
) -> None:
    a, b = two
    assets = locked_on_a(a, mirror_root)
    good = a.lock.read_text()
    text, needle = HOSTILE_LOCKS[case]
    name = VULKAN.format(tag="b100")
    sha = hashlib.sha256(assets[name]).hexdigest()
    text = {
        "ASSET": good.replace(f"name: {name}", "name: ../../../etc/passwd"),
        "SHORT": good.replace(sha, sha[:40]),
        "ID": good.replace("- id: llama-server@b100-vulkan", "- id: llama-server@b999-vulkan"),
        "ACTIVE": good.replace("llama-server: llama-server@b100-vulkan", "llama-server: x@y-z"),
    }.get(text, text)
    path = b.config.parent / "hostile.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode("utf-8", "surrogateescape"))
    before = b.state()
    mirror.requests.clear()
    for command in (["sync", str(path)], ["fetch", str(b.home.parent / "out"), str(path)]):
        line = b.refused(needle if case != "not yaml" else str(path), *command)
        assert str(path) in line
    assert b.state() == before
    assert not (b.home.parent / "out").exists()
    assert mirror.requests == []


# --- air-gapped: fetch into a folder, serve it, sync from it ------------------------------------


def test_fetch_serve_and_sync_offline(
    two: tuple[Machine, Machine],
    mirror: MirrorServer,
    mirror_root: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    a, b = two
    publish_llama(mirror_root, "b100")
    a.ok("install", "llama-server", "b100")
    carried = tmp_path / "usb"
    out = a.json("lock", "--fetch", str(carried))
    name = VULKAN.format(tag="b100")
    assert out["fetch"]["fetched"] == [f"ggml-org/llama.cpp/b100/{name}"]  # type: ignore[index]
    folder = carried / "ggml-org" / "llama.cpp" / "b100"
    assert sorted(p.name for p in folder.iterdir()) == [".release.json", name]
    again = a.ok("fetch", str(carried), str(a.lock))
    assert "fetched 0 assets" in again.out and "1 already there" in again.out

    mirror.requests.clear()
    offline = MirrorServer(carried).start()
    offline.handle_error = lambda request, client_address: None  # type: ignore[method-assign]
    try:
        monkeypatch.setenv("BACKENDMGR_GITHUB_API", offline.base_url)
        b.ok("sync", "--locked", str(a.lock))
        assert downloads(offline) == [f"/download/ggml-org/llama.cpp/b100/{name}"]
    finally:
        offline.stop()
    assert mirror.requests == []  # nothing reached the first "internet" mirror
    assert b.builds() == a.builds()


def test_fetch_refuses_a_tampered_asset_and_keeps_nothing(
    two: tuple[Machine, Machine], mirror: MirrorServer, mirror_root: Path, tmp_path: Path
) -> None:
    a, _ = two
    publish_llama(mirror_root, "b100")
    a.ok("install", "llama-server", "b100")
    a.ok("lock")
    name = VULKAN.format(tag="b100")
    (mirror_root / "ggml-org/llama.cpp/b100" / name).write_bytes(b"other bytes")
    carried = tmp_path / "usb"
    a.refused("nothing was installed", "fetch", str(carried))
    left = tree(carried) if carried.exists() else []
    assert [p for p in left if p.endswith(name) or ".part" in p] == []


def _served(mirror_root: Path) -> dict[str, str]:
    """Every asset the mirror serves, relative path → SHA-256."""
    return {
        str(p.relative_to(mirror_root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in mirror_root.rglob("*")
        if p.is_file() and not p.name.startswith(".")
    }


FOUR = ("cpu", "vulkan", "rocm", "cuda")


@pytest.mark.parametrize("command", ["fetch", "lock --fetch"])
def test_fetch_many_assets_of_one_release_into_an_empty_folder(
    two: tuple[Machine, Machine],
    mirror: MirrorServer,
    mirror_root: Path,
    tmp_path: Path,
    command: str,
) -> None:
    """Four builds of one release share its folder (and its folder of partial downloads):
    every asset lands with its SHA-256, and nothing of the downloads is left behind."""
    a, _ = two
    publish_llama(mirror_root, "b100", FOUR)
    for variant in FOUR:
        a.ok("install", "llama-server", "b100", "--variant", variant)
    a.ok("lock")
    for attempt in range(3):  # the jobs' timing varies; each try starts from an empty folder
        carried = tmp_path / f"usb{attempt}"
        out = a.json(*command.split(), str(carried), *([str(a.lock)] if command == "fetch" else []))
        fetched = out["fetched"] if command == "fetch" else out["fetch"]["fetched"]  # type: ignore[index]
        assert len(fetched) == 4
        assert _served(carried) == _served(mirror_root)
        assert not list(carried.rglob(".partial"))
        assert not [p for p in carried.rglob("*") if ".part" in p.name]


def test_fetch_refuses_a_lock_naming_one_file_twice_with_different_contents(
    two: tuple[Machine, Machine], mirror: MirrorServer, mirror_root: Path, tmp_path: Path
) -> None:
    """Two jobs must never write one file: the same asset twice is fetched once, and the
    same name with two digests is refused before anything is downloaded."""
    a, _ = two
    assets = publish_llama(mirror_root, "b100", ("cpu", "vulkan"))
    for variant in ("cpu", "vulkan"):
        a.ok("install", "llama-server", "b100", "--variant", variant)
    a.ok("lock")
    one, other = sorted(assets)
    edited = tmp_path / "edited.lock"
    edited.write_text(a.lock.read_text().replace(f"name: {other}", f"name: {one}"))
    mirror.requests.clear()
    line = a.refused("twice with different contents", "fetch", str(tmp_path / "usb"), str(edited))
    assert one in line
    assert downloads(mirror) == [] and not (tmp_path / "usb").exists()


@pytest.mark.parametrize("fault", ["missing", "other bytes"])
def test_lock_fetch_failing_midway_keeps_the_old_lock(
    two: tuple[Machine, Machine],
    mirror: MirrorServer,
    mirror_root: Path,
    tmp_path: Path,
    fault: str,
) -> None:
    """The lock is written only once every asset is in place: a 404 or a digest mismatch for
    one asset leaves the lock as it was, byte for byte."""
    a, _ = two
    assets = publish_llama(mirror_root, "b100", FOUR)
    a.ok("install", "llama-server", "b100", "--variant", "vulkan")
    a.ok("lock")
    before = a.lock.read_bytes()
    for variant in ("cpu", "rocm", "cuda"):
        a.ok("install", "llama-server", "b100", "--variant", variant)
    broken = mirror_root / "ggml-org/llama.cpp/b100" / next(n for n in assets if "rocm" in n)
    if fault == "missing":
        broken.unlink()
    else:
        broken.write_bytes(b"other bytes")
    carried = tmp_path / "usb"
    line = a.refused("rocm", "lock", "--fetch", str(carried))
    assert ("404" in line) if fault == "missing" else ("nothing was installed" in line)
    assert a.lock.read_bytes() == before
    assert not [p for p in tree(carried) if "rocm" in p] if carried.exists() else True


def test_sync_stopped_with_ctrl_c_after_its_first_install_never_activates_an_older_build(
    two: tuple[Machine, Machine], mirror: MirrorServer, mirror_root: Path
) -> None:
    """The lock activates the newest of three builds; a sync into an empty home gets SIGINT
    once its first build is registered (the others' downloads are held): it leaves the old
    state (nothing activated) or the lock's activated build, never an older one."""
    a, b = two
    tags = ("b11100", "b11150", "b11211")
    for i, tag in enumerate(tags):
        publish_llama(mirror_root, tag, published_at=f"2026-09-0{i + 1}T00:00:00Z")
        a.ok("install", "llama-server", tag)
    a.ok("activate", "llama-server@b11211-vulkan")
    a.ok("lock")
    gates = DownloadGates(mirror, tags)
    proc = spawn_backendmgr(*b.flags, "sync", str(a.lock))
    try:
        (first,) = wait_until(gates.began, "a download began", timeout=120, proc=proc)
        gates.open(first)
        wait_until(
            lambda: b.config.exists() and f"llama-server@{first}-vulkan" in b.config.read_text(),
            "the first build was registered",
            timeout=120,
            proc=proc,
        )
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        gates.open()
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    active = [i for i, (on, _) in b.builds().items() if on]
    assert active in ([], ["llama-server@b11211-vulkan"]), (first, active)
    assert b.ok("sync", str(a.lock))  # a second sync completes what the first began
    assert b.builds() == a.builds()


# --- venv builds ---------------------------------------------------------------------------------


def test_venv_builds_lock_and_sync_the_same_distributions(
    two: tuple[Machine, Machine], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = two
    wheels = tmp_path / "wheels"
    make_wheel(wheels, "1.0.0")
    make_wheel(wheels, "2.0.0")
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheels))
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.delenv("BACKENDMGR_OFFLINE")
    uv = Path(sys.executable).parent / "uv"
    monkeypatch.setenv("BACKENDMGR_UV", str(uv))
    for m in (a, b):
        (m.config.parent / "manifests").mkdir(parents=True, exist_ok=True)
        (m.config.parent / "manifests" / "toy.yaml").write_text(MANIFEST)
    a.ok("install", "toy", "1.0.0")
    a.ok("lock")
    text = a.lock.read_text()
    assert "type: pypi" in text and "package: toy-server" in text
    assert "- toy-server==1.0.0" in text
    assert f"python: {'.'.join(map(str, sys.version_info[:3]))}" in text

    edited = b.config.parent / "extra.lock"
    edited.write_text(text.replace("- toy-server==1.0.0", "- toy-server==1.0.0\n      - nope==9"))
    b.refused("toy@1.0.0-cpu", "sync", str(edited))
    assert b.builds() == {}
    assert [p for p in tree(b.home / "builds") if "staging" in p] == []

    other_index = text.replace(
        "package: toy-server\n", "package: toy-server\n      index_url: http://127.0.0.1:9/simple\n"
    )
    assert other_index != text
    edited.write_text(other_index)
    b.refused("the lock's index settings", "sync", str(edited))
    b.ok("sync", str(a.lock))

    def packages(m: Machine) -> dict[str, str]:
        receipt = m.home / "builds" / "toy" / "1.0.0-cpu" / ".backendmgr.json"
        return dict(json.loads(receipt.read_text())["packages"])

    assert packages(b) == packages(a) and packages(b)["toy-server"] == "1.0.0"
    out = subprocess.run(
        [str(b.home / "builds" / "toy" / "1.0.0-cpu" / "bin" / "toy-server")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out.strip() == "toy-server 1.0.0"
    assert "nothing to do" in b.ok("sync", str(a.lock)).out


# --- drift, prune --------------------------------------------------------------------------------


def test_sync_locked_on_a_drifted_machine_fails_and_changes_nothing(
    two: tuple[Machine, Machine], mirror: MirrorServer, mirror_root: Path
) -> None:
    a, b = two
    publish_llama(mirror_root, "b100", published_at="2026-09-01T00:00:00Z")
    publish_llama(mirror_root, "b101", published_at="2026-09-02T00:00:00Z")
    publish_llama(mirror_root, "b102", published_at="2026-09-03T00:00:00Z")
    a.ok("install", "llama-server", "b100")
    a.ok("install", "llama-server", "b101")
    a.ok("lock")
    b.ok("install", "llama-server", "b102")  # drift: a build the lock does not know
    before = b.state()
    b.refused(
        "llama-server@b102-vulkan is installed but not in the lock", "sync", "--locked", str(a.lock)
    )
    assert b.state() == before
    b.ok("sync", str(a.lock))  # without --locked the extra build stays
    receipt = b.home / "builds" / "llama-server" / "b101-vulkan" / ".backendmgr.json"
    data = json.loads(receipt.read_text())
    data["assets"][0]["sha256"] = "f" * 64
    receipt.write_text(json.dumps(data))
    before = b.state()
    b.refused(
        "llama-server@b101-vulkan has other assets than the lock",
        "sync",
        "--locked",
        "--prune",
        str(a.lock),
    )
    assert b.state() == before
    fixed = b.json("sync", str(a.lock))  # reinstalls it with the locked bytes
    assert fixed["reinstall"] == ["llama-server@b101-vulkan"]  # type: ignore[index]
    assert b.builds()["llama-server@b101-vulkan"] == a.builds()["llama-server@b101-vulkan"]


def test_prune_keeps_pinned_builds_unless_forced(
    two: tuple[Machine, Machine], mirror: MirrorServer, mirror_root: Path
) -> None:
    a, b = two
    for n, tag in enumerate(("b100", "b101", "b102")):
        publish_llama(mirror_root, tag, published_at=f"2026-09-0{n + 1}T00:00:00Z")
    a.ok("install", "llama-server", "b100")
    a.ok("lock")
    b.ok("install", "llama-server", "b101")
    b.ok("install", "llama-server", "b102")
    b.ok("pin", "qwen3-8b", "llama-server@b102-vulkan")
    b.refused("--force only applies with --prune", "sync", "--force", str(a.lock), code=2)
    pruned = b("sync", "--prune", str(a.lock))
    assert pruned.code == 0, pruned
    assert "kept llama-server@b102-vulkan: pinned by qwen3-8b" in pruned.err
    assert "removed llama-server@b101-vulkan" in pruned.out
    assert sorted(b.builds()) == ["llama-server@b100-vulkan", "llama-server@b102-vulkan"]
    assert b.builds()["llama-server@b100-vulkan"][0] is True
    forced = b.json("sync", "--prune", "--force", str(a.lock))
    assert forced["remove"] == ["llama-server@b102-vulkan"]  # type: ignore[index]
    assert b.builds() == a.builds()


# --- kill -9 -----------------------------------------------------------------------------------


@pytest.mark.slow(reason="six real syncs killed at random moments (seeded)")
def test_kill_9_during_sync_leaves_every_build_absent_or_complete(
    two: tuple[Machine, Machine], mirror: MirrorServer, mirror_root: Path
) -> None:
    a, b = two
    for n, tag in enumerate(("b100", "b101", "b102")):
        entries = [*llama_entries(tag), Entry("build/bin/blob.bin", os.urandom(1 << 20))]
        publish(
            mirror_root,
            "ggml-org/llama.cpp",
            tag,
            {VULKAN.format(tag=tag): make_tar(entries)},
            published_at=f"2026-09-0{n + 1}T00:00:00Z",
        )
        a.ok("install", "llama-server", tag)
    a.ok("lock")
    mirror.throttle = 4 << 20  # each build takes about a quarter of a second
    rng = random.Random(20261130)
    env = dict(os.environ)

    def spawn(*args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-m", "backendmgr", *b.flags, *args],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    for _ in range(6):
        proc = spawn("sync", str(a.lock))
        time.sleep(rng.uniform(0.2, 1.2))
        proc.kill()
        proc.communicate(timeout=30)
        for build_id, (_, shas) in b.builds().items():  # whatever is listed is whole
            assert shas == a.builds()[build_id][1]
            row = next(r for r in b.json("list") if r["id"] == build_id)  # type: ignore[union-attr]
            assert Path(row["path"]).is_file()
        if len(b.builds()) == 3:
            shutil.rmtree(b.home / "builds" / "llama-server" / "b102-vulkan")
    b.ok("doctor", "--fix")
    mirror.throttle = None
    b.ok("sync", str(a.lock))
    assert b.builds() == a.builds()
    b.ok("doctor")
