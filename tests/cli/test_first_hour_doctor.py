"""The first hour of a new user (issue 20, points 4 to 6): what ``doctor`` repairs and says,
and a pinned context that cannot fit, each through the real CLI."""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import pytest

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


def test_what_killed_writes_left_is_reported_removed_and_never_piles_up(
    cli: Cli, tmp_path: Path, config_path: Path
) -> None:
    """A write killed between its temporary file and its rename leaves the file beside the
    config or the llama-swap config: doctor names it, doctor --fix removes it, and the next
    write of that file removes it anyway. Nothing else that looks alike is touched."""
    from tests.support.ggufs import write_gguf

    write_gguf(tmp_path / "models" / "m1.gguf", "qwen3", layers=4, ctx=4096)
    config_path.parent.mkdir(parents=True, exist_ok=True)
    config_path.write_text(json.dumps({"models_dirs": [str(tmp_path / "models")]}))
    ok(cli("set", "m1", "ctx=4096"))
    target = Path(json.loads(ok(cli("--json", "config", "path")).out)["output"])
    config = config_path.resolve()
    left = [
        config.with_name(f".{config.name}.0123456789ab.tmp"),
        config.with_name(f"..{config.name}.parsed.json.00000000abcd.tmp"),
        target.with_name(f".{target.name}.fedcba987654.tmp"),
    ]
    alike = [
        config.with_name(f".{config.name}.not-ours.tmp"),  # not 12 hex digits
        config.with_name(f".{config.name}.0123456789ab.tmp.keep"),
        config.with_name("notes.0123456789ab.tmp"),
    ]
    live = config.with_name(f".{config.name}.aaaaaaaaaaaa.tmp")  # another writer's, just made
    stale = time.time() - 120  # a live write renames its own within milliseconds
    for path in [*left, *alike, live]:
        path.write_text("half")
        if path != live:
            os.utime(path, (stale, stale))
    report = cli("--json", "doctor")
    assert report.code == 1
    said = json.loads(report.out)["problems"]
    for path in left:
        assert f"{path} is left by a write that was interrupted (doctor --fix removes it)" in said
    fixed = json.loads(ok(cli("--json", "doctor", "--fix")).out)["fixed"]
    assert sorted(f for f in fixed if "interrupted" in f) == sorted(
        f"removed {path}, left by an interrupted write" for path in left
    )
    assert not any(p.exists() for p in left) and all(p.exists() for p in [*alike, live])
    assert str(live) not in report.out

    for path in (left[0], left[2]):  # the next edit of the config takes its leftovers away
        path.write_text("half")
        os.utime(path, (stale, stale))
    ok(cli("set", "m1", "ctx=8192"))
    assert not left[0].exists() and not left[2].exists() and live.exists()


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


# --- 6: a pinned context that cannot fit -----------------------------------------------------


def _user(tmp_path: Path, config_path: Path, budget: str) -> Path:
    """A models folder with one chat model, a row for the llama stand-in, and ``budget``."""
    from tests.support.ggufs import write_gguf
    from tests.support.standins import SERVER_STANDIN
    from tests.support.standins import python_exe as _exe

    server = _exe(tmp_path / "bin" / "llama-server", SERVER_STANDIN)
    root = tmp_path / "models"
    write_gguf(root / "chat.gguf", "qwen3", size_bytes=1 << 20)
    config_path.parent.mkdir(parents=True, exist_ok=True)
    config_path.write_text(
        f"models_dirs: [{json.dumps(str(root))}]\n{budget}"
        f"backends:\n  - {{id: fake-llama, kind: llama, path: {json.dumps(str(server))}}}\n"
    )
    return tmp_path / "bin"


def test_a_pinned_ctx_over_the_budget_warns_at_set_and_is_noted_everywhere(
    cli: Cli, tmp_path: Path, config_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BACKENDMGR_VRAM_GB", "24")
    _user(tmp_path, config_path, "vram_budget_gb: 16\n")
    fits = json.loads(ok(cli("--json", "set", "chat", "ctx=8192")).out)
    assert fits.get("warnings", []) == []
    said = ok(cli("set", "chat", "ctx=262144"))
    (row,) = json.loads(ok(cli("--json", "models")).out)
    est = row["est_vram_gb"]  # the one estimate, as models shows it
    assert est > 24
    note = (
        f"ctx 262144: {est:.2f} GiB estimated, more than the 16 GiB of vram_budget_gb; it may "
        "not load (a smaller ctx, or unset ctx to size it to fit)"
    )
    assert f"warning: {note}" in said.err.splitlines(), said
    assert note in json.loads(ok(cli("--json", "set", "chat", "ctx=262144")).out).get("warnings")
    assert note in row["notes"]
    assert "more than the 16 GiB of vram_budget_gb" in ok(cli("models")).out
    target = Path(json.loads(ok(cli("--json", "config", "path")).out)["output"])
    ok(cli("generate"))
    assert f"# NOTE {note}" in target.read_text(encoding="utf-8")
    # the model's own target outranks the budget; past the card, the card is named
    big = json.loads(ok(cli("--json", "set", "chat", "vram_target_gb=64")).out).get("warnings")
    assert big == [note.replace("the 16 GiB of vram_budget_gb", "the 24 GiB of the GPU's memory")]
    small = json.loads(ok(cli("--json", "set", "chat", "vram_target_gb=20")).out).get("warnings")
    assert small == [note.replace("16 GiB of vram_budget_gb", "20 GiB of vram_target_gb")]
    # unpinned, the context is sized to fit: no note
    ok(cli("unset", "chat", "ctx"))
    (row,) = json.loads(ok(cli("--json", "models")).out)
    assert not [n for n in row["notes"] if "GiB estimated, more than" in n], row


def test_verify_says_when_the_measured_memory_exceeds_the_budget(
    cli: Cli, tmp_path: Path, config_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.support.standins import NVIDIA_SMI
    from tests.support.standins import python_exe as _exe

    bin_dir = _user(tmp_path, config_path, "models:\n  chat: {vram_target_gb: 4, ctx: 4096}\n")
    _exe(bin_dir / "nvidia-smi", NVIDIA_SMI)  # 6462 MiB for each process of the group
    fake = tmp_path / "fake"
    fake.mkdir()
    monkeypatch.setenv("FAKE_DIR", str(fake))
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    result = json.loads(ok(cli("--json", "verify")).out)["results"][0]
    assert result["gpu_gib"] == round(6462 / 1024, 3) and result["budget_gb"] == 4
    assert result["over_budget"] == "more than the 4 GiB of vram_target_gb"
    line = ok(cli("verify")).out
    assert "chat: ok in" in line and "6.31 GiB used, more than the 4 GiB of vram_target_gb" in line
    # within the budget, nothing is said
    ok(cli("set", "chat", "vram_target_gb=8"))
    result = json.loads(ok(cli("--json", "verify")).out)["results"][0]
    assert result["over_budget"] is None and result["budget_gb"] == 8
