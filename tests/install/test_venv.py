"""Python-packaged backends as real virtual environments, installed offline from wheels the
test builds (PIP_FIND_LINKS + PIP_NO_INDEX), with uv and with plain venv + pip."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.cli import Cli, ok, spawn_backendmgr
from tests.support.wait import wait_until
from tests.support.wheels import TOY_MANIFEST as MANIFEST
from tests.support.wheels import make_wheel

# Each install builds a real venv; with plain venv + pip that is ensurepip and a pip run, several
# seconds of CPU, so the pip variants are the slow ones.
PIP_IS_SLOW = pytest.mark.slow(reason="a real venv per install: ensurepip, then pip")
# A test whose subject is no installer's own (the staging folder and its commit, a manifest's
# reading) runs with uv alone: the code under it is the same for both, and what differs with
# pip (making the venv, its pip run, its failure's lines, its launchers' relocation) is what
# the tests that keep both installers check.
UV_ONLY = pytest.mark.parametrize("installer", ["uv"], indirect=True)


@pytest.fixture(params=["uv", pytest.param("pip", marks=PIP_IS_SLOW)])
def installer(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    config_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> str:
    wheels = tmp_path / "wheels"
    make_wheel(wheels, "1.0.0")
    make_wheel(wheels, "2.0.0")
    make_wheel(wheels, "2.1.0rc1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheels))
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.delenv("BACKENDMGR_OFFLINE")
    manifests = config_path.parent / "manifests"
    manifests.mkdir(parents=True)
    (manifests / "toy.yaml").write_text(MANIFEST)
    if request.param == "pip":
        monkeypatch.setenv("BACKENDMGR_UV", "none")
    else:
        uv = Path(sys.executable).parent / "uv"
        assert uv.is_file(), "the test extras install uv"
        monkeypatch.setenv("BACKENDMGR_UV", str(uv))
    return str(request.param)


def test_two_versions_side_by_side(cli: Cli, installer: str, tmp_path: Path) -> None:
    releases = json.loads(ok(cli("--json", "releases", "toy")).out)
    assert [r["tag"] for r in releases] == ["2.0.0", "1.0.0"]  # no pre-release unless asked
    first = json.loads(ok(cli("--json", "install", "toy", "1.0.0")).out)
    assert first["activated"] is True
    assert first["packages"]["toy-server"] == "1.0.0"
    assert first["python"] == ".".join(map(str, sys.version_info[:3]))
    second = json.loads(ok(cli("--json", "install", "toy")).out)
    assert (second["version"], second["activated"]) == ("2.0.0", False)
    home = tmp_path / "home" / "builds" / "toy"
    for version in ("1.0.0", "2.0.0"):
        out = subprocess.run(
            [str(home / f"{version}-cpu" / "bin" / "toy-server")],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert out.strip() == f"toy-server {version}"
        for launcher in (home / f"{version}-cpu" / "bin").iterdir():  # pip's and activate too
            if launcher.is_file() and not launcher.is_symlink():
                assert b".staging-" not in launcher.read_bytes(), launcher
    rows = json.loads(ok(cli("--json", "backends")).out)
    assert [(r["id"], r["version"], r["build"]) for r in rows] == [
        ("toy", "1.0.0", False),
        ("toy@2.0.0-cpu", "2.0.0", True),
        ("toy@1.0.0-cpu", "1.0.0", True),
    ]
    assert rows[0]["default"] is True and rows[0]["kind"] == "vllm"
    ok(cli("activate", "toy@2.0.0-cpu"))
    rows = json.loads(ok(cli("--json", "backends")).out)
    assert rows[0]["path"] == str(home / "2.0.0-cpu" / "bin" / "toy-server")
    listed = json.loads(ok(cli("--json", "list")).out)
    assert [(b["id"], b["activated"]) for b in listed] == [
        ("toy@2.0.0-cpu", True),
        ("toy@1.0.0-cpu", False),
    ]
    receipt = json.loads((home / "1.0.0-cpu" / ".backendmgr.json").read_text())
    assert receipt["source"] == "pypi:toy-server" and receipt["exe"] == "bin/toy-server"
    ok(cli("uninstall", "toy@1.0.0-cpu"))
    assert not (home / "1.0.0-cpu").exists()


def test_missing_version_lists_the_real_ones(cli: Cli, installer: str, tmp_path: Path) -> None:
    result = cli("install", "toy", "9.9.9")
    assert result.code == 1
    assert result.err.strip().splitlines()[-1] == (
        "error: toy 9.9.9 does not exist; available: 2.0.0, 1.0.0"
    )
    assert not (tmp_path / "home" / "builds").exists()


def test_failed_pip_run_reports_its_last_lines(
    cli: Cli, installer: str, tmp_path: Path, config_path: Path
) -> None:
    (tmp_path / "wheels" / "toy_server-2.0.0-py3-none-any.whl").write_bytes(b"not a zip")
    result = cli("install", "toy", "2.0.0")
    assert result.code == 1
    line = result.err.strip().splitlines()[-1]
    assert line.startswith("error: ") and "install failed with exit status" in line
    assert not (tmp_path / "home" / "builds" / "toy" / "2.0.0-cpu").exists()
    assert not config_path.exists()


def test_kill_9_during_install_lists_nothing(cli: Cli, installer: str, tmp_path: Path) -> None:
    make_wheel(tmp_path / "wheels", "3.0.0", padding=20 << 20)
    target = tmp_path / "home" / "builds" / "toy" / "3.0.0-cpu"
    proc = spawn_backendmgr(
        "install",
        "toy",
        "3.0.0",
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    wait_until(
        lambda: list(target.parent.glob("3.0.0-cpu.staging-*/bin")),
        "the install started building its venv",
        timeout=120,
        proc=proc,
    )
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not target.exists()  # the venv is built in a staging folder, never in place
    # what is left is checked (and repaired by the next install) in this process
    assert json.loads(ok(cli("--json", "list")).out) == []
    ok(cli("install", "toy", "3.0.0"))
    assert (target / ".backendmgr.json").exists()


def test_builtin_vllm_manifest_dry_run_and_unreachable_index(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("BACKENDMGR_OFFLINE")
    wheels = tmp_path / "vllm-wheels"
    wheels.mkdir()
    (wheels / "vllm-0.11.2-cp38-abi3-manylinux1_x86_64.whl").write_bytes(b"")
    (wheels / "vllm-0.10.1-cp38-abi3-manylinux1_x86_64.whl").write_bytes(b"")
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheels))
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("BACKENDMGR_GPU", "NVIDIA GeForce RTX 4090")
    plan = json.loads(ok(cli("--json", "install", "vllm", "--dry-run")).out)
    assert (plan["id"], plan["variant"], plan["requirement"]) == (
        "vllm@0.11.2-cuda",
        "cuda",
        "vllm==0.11.2",
    )
    # the stand-ins declare no Requires-Python: the running interpreter does
    assert plan["python"] == ".".join(map(str, sys.version_info[:3])) and plan["dry_run"] is True
    assert plan["interpreter"] == sys.executable and plan["requires_python"] is None
    assert plan["path"].endswith("builds/vllm/0.11.2-cuda/bin/vllm")
    cpu = json.loads(
        ok(cli("--json", "install", "vllm", "0.10.1", "--variant", "cpu", "--dry-run")).out
    )
    assert "--torch-backend" in cpu["pip_args"]
    assert "would install vllm@0.10.1-cuda" in ok(cli("install", "vllm", "0.10.1", "--dry-run")).out
    monkeypatch.delenv("PIP_FIND_LINKS")
    monkeypatch.delenv("PIP_NO_INDEX")
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")
    result = cli("install", "vllm", "--dry-run")
    assert result.code == 1
    errors = [line for line in result.err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "cannot reach the package index" in errors[0]
    assert not (tmp_path / "home" / "builds").exists()


@UV_ONLY  # a failed pip run is test_failed_pip_run_reports_its_last_lines[pip]
def test_failed_reinstall_keeps_the_working_build(
    cli: Cli, installer: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A broken package or a build that does not run leaves the installed build as it was."""
    monkeypatch.setenv("UV_NO_CACHE", "1")  # uv would reuse the good wheel of the same name
    old_umask = os.umask(0o022)
    try:
        ok(cli("install", "toy", "1.0.0"))
        home = tmp_path / "home" / "builds" / "toy"
        build = home / "1.0.0-cpu"
        exe = build / "bin" / "toy-server"
        receipt = (build / ".backendmgr.json").read_bytes()
        wheel = tmp_path / "wheels" / "toy_server-1.0.0-py3-none-any.whl"
        for breakage in ("not a wheel", "no entry point"):
            if breakage == "not a wheel":
                wheel.write_bytes(b"not a zip")
            else:
                wheel.unlink()
                make_wheel(wheel.parent, "1.0.0", entry="missing")  # installs, fails smoke
            result = cli("install", "toy", "1.0.0", "--reinstall")
            assert result.code == 1, breakage
            errors = [line for line in result.err.splitlines() if line.startswith("error:")]
            assert len(errors) == 1 and "failed with exit status" in errors[0], result.err
            assert not result.err.startswith("Traceback"), result.err
            listed = json.loads(ok(cli("--json", "list")).out)
            assert [(b["id"], b["activated"]) for b in listed] == [("toy@1.0.0-cpu", True)]
            rows = json.loads(ok(cli("--json", "backends")).out)
            assert rows[0]["id"] == "toy" and rows[0]["path"] == str(exe)
            ran = subprocess.run([str(exe)], capture_output=True, text=True, check=True)
            assert ran.stdout.strip() == "toy-server 1.0.0"
            assert (build / ".backendmgr.json").read_bytes() == receipt
            assert sorted(p.name for p in home.iterdir()) == ["1.0.0-cpu"], breakage

        wheel.unlink()
        make_wheel(wheel.parent, "1.0.0", padding=10)  # a good package again
        ok(cli("install", "toy", "1.0.0", "--reinstall"))
        assert (build / ".backendmgr.json").read_bytes() != receipt
        assert sorted(p.name for p in home.iterdir()) == ["1.0.0-cpu"]
        ran = subprocess.run([str(exe)], capture_output=True, text=True, check=True)
        assert ran.stdout.strip() == "toy-server 1.0.0"
        assert (build / "lib").exists() and "staging" not in exe.read_text()
        for launcher in (build / "bin").iterdir():
            if launcher.is_file() and not launcher.is_symlink():
                assert b".staging-" not in launcher.read_bytes(), launcher
        assert stat.S_IMODE(build.stat().st_mode) == 0o755
        assert stat.S_IMODE((build / ".backendmgr.json").stat().st_mode) == 0o644
        assert stat.S_IMODE(exe.stat().st_mode) == 0o755
    finally:
        os.umask(old_umask)


@UV_ONLY  # the manifest is read alike for both; a pip install is test_two_versions_…[pip]
def test_pypi_manifest_with_only_id_and_label_installs_here(
    cli: Cli, installer: str, tmp_path: Path, config_path: Path
) -> None:
    """SPEC §5 names only ``id`` and ``label`` for a variant; for pip that is enough."""
    (config_path.parent / "manifests" / "toy.yaml").write_text(
        "id: toy\nkind: vllm\nsource: {type: pypi, package: toy-server}\n"
        "exe: {default: bin/toy-server}\nvariants:\n  - id: cpu\n    label: CPU\n"
    )
    catalog = {c["id"]: c for c in json.loads(ok(cli("--json", "catalog")).out)}
    assert catalog["toy"]["variants"] == [
        {"id": "cpu", "available": True, "runs_here": True, "why_not": None}
    ]
    assert catalog["toy"]["suggested"] == "cpu"
    other = json.loads(
        ok(cli("--json", "install", "toy", "--dry-run", "--platform", "windows-x64")).out
    )
    assert other["variant"] == "cpu"
    done = json.loads(ok(cli("--json", "install", "toy", "1.0.0")).out)
    assert (done["id"], done["activated"]) == ("toy@1.0.0-cpu", True)
    ran = subprocess.run([done["path"]], capture_output=True, text=True, check=True)
    assert ran.stdout.strip() == "toy-server 1.0.0"


def test_a_bare_exe_name_in_a_pypi_manifest_is_the_venvs_console_script(
    cli: Cli, tmp_path: Path, config_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 20: ``exe: {linux: NAME}`` as SPEC §5 writes it means ``bin/NAME`` in the venv
    (``Scripts/NAME.exe`` on Windows); a path stays a path."""
    make_wheel(tmp_path / "wheels", "1.0.0")
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path / "wheels"))
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.delenv("BACKENDMGR_OFFLINE")
    monkeypatch.setenv("BACKENDMGR_UV", str(Path(sys.executable).parent / "uv"))
    manifests = config_path.parent / "manifests"
    manifests.mkdir(parents=True)
    (manifests / "toy.yaml").write_text(
        "id: toy\nkind: vllm\nsource: {type: pypi, package: toy-server}\n"
        "exe: {linux: toy-server, windows: toy-server}\n"
        "variants:\n  - id: cpu\n    label: CPU\n"
    )
    plan = json.loads(
        ok(cli("--json", "install", "toy", "--dry-run", "--platform", "windows-x64")).out
    )
    assert plan["path"].endswith("Scripts/toy-server.exe")
    done = json.loads(ok(cli("--json", "install", "toy", "1.0.0")).out)
    assert done["path"].endswith("/bin/toy-server")
    ran = subprocess.run([done["path"]], capture_output=True, text=True, check=True)
    assert ran.stdout.strip() == "toy-server 1.0.0"
