"""The first hour of a new user (issue 20, points 4 to 6): what ``doctor`` repairs and says,
and a pinned context that cannot fit, each through the real CLI."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

from backendmgr.mirror import MirrorServer
from tests.support import publish_llama
from tests.support.cli import CliResult

Cli = Callable[..., CliResult]


def ok(result: CliResult) -> CliResult:
    assert result.code == 0, result
    assert "Traceback" not in result.err, result.err
    return result


# --- 4: doctor --fix lists its repairs and regenerates ----------------------------------------


def test_doctor_fix_lists_each_repair_and_regenerates(
    cli: Cli, mirror: MirrorServer, mirror_root: Path, tmp_path: Path
) -> None:
    publish_llama(mirror_root, "b100", ["vulkan"])
    publish_llama(mirror_root, "b200", ["vulkan"])
    ok(cli("install", "llama-server", "b100"))
    ok(cli("install", "llama-server", "b200"))  # b100 stays the activated one
    old = tmp_path / "home" / "builds" / "llama-server" / "b100-vulkan"
    shutil.rmtree(old)

    before = cli("doctor")
    assert before.code == 1
    assert 'error: build row "llama-server@b100-vulkan" has no installed build' in before.err

    report = json.loads(ok(cli("--json", "doctor", "--fix")).out)
    repair = 'removed build row "llama-server@b100-vulkan": its build folder is gone'
    assert report["ok"] is True and report["problems"] == []
    target = Path(json.loads(ok(cli("--json", "config", "path")).out)["output"])
    exe = "build/bin/llama-server"
    new = old.with_name("b200-vulkan") / exe
    assert report["fixed"] == [
        repair,
        f'repointed row "llama-server" to {new}: {old / exe} is gone',
        f"rewrote {target}",
    ]
    ok(cli("generate", "--check"))  # the generated file follows the repaired registry
    assert ok(cli("doctor")).out.splitlines()[-1] == "everything is consistent"
    assert json.loads(ok(cli("--json", "doctor", "--fix")).out)["fixed"] == []

    # the text form prints each repair
    ok(cli("install", "llama-server", "b100"))
    shutil.rmtree(old)
    text = ok(cli("doctor", "--fix"))
    lines = text.out.splitlines()
    assert repair in lines and lines[-2:] == [f"rewrote {target}", "everything is consistent"]
    ok(cli("generate", "--check"))


# --- 5: doctor and generate --check see the same hand edits ---------------------------------


def test_doctor_reports_a_hand_edit_that_generate_check_reports(
    cli: Cli, mirror: MirrorServer, mirror_root: Path, tmp_path: Path
) -> None:
    publish_llama(mirror_root, "b100", ["vulkan"])
    ok(cli("install", "llama-server", "b100"))
    ok(cli("doctor"))
    target = Path(json.loads(ok(cli("--json", "config", "path")).out)["output"])
    text = target.read_text(encoding="utf-8")
    edited = text.replace("healthCheckTimeout:", "ttl: 60\nhealthCheckTimeout:", 1)
    assert edited != text
    target.write_text(edited, encoding="utf-8")

    check = cli("generate", "--check")
    assert check.code == 1 and "was modified since backendmgr wrote it" in check.err, check
    doctor = cli("--json", "doctor")
    assert doctor.code == 1, doctor
    problems = json.loads(doctor.out)["problems"]
    assert problems == [check.err.removeprefix("error: ").strip()], problems
    # doctor --fix rewrites it as generate would, keeping the edited copy
    report = json.loads(ok(cli("--json", "doctor", "--fix")).out)
    assert any("kept" in line and ".bak" in line for line in report["fixed"]), report
    ok(cli("generate", "--check"))
    ok(cli("doctor"))
