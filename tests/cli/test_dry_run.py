"""``--dry-run`` of ``pin``, ``unpin``, ``set``, ``unset``, ``activate`` and ``uninstall``
(issue 29): the same path as the real run, stopped before the write. Each dry run is followed
by the real run: both report the same ``changed``, the dry run wrote nothing, and its diff is
exactly what the real run did to the config file."""

from __future__ import annotations

import json
import os
from pathlib import Path

from backendmgr.config.store import text_diff
from backendmgr.mirror import MirrorServer
from tests.support import publish_llama
from tests.support.cli import Cli, ok


def _state(config: Path, home: Path) -> tuple[bytes | None, list[str]]:
    """The config's bytes and every file under the home (nothing but these may change)."""
    data = config.read_bytes() if config.exists() else None
    files = sorted(str(p.relative_to(home)) for p in home.rglob("*")) if home.exists() else []
    return data, [f for f in files if not f.startswith("cache")]


def _dry_then_real(cli: Cli, config: Path, home: Path, *words: str) -> tuple[dict, dict]:
    before = _state(config, home)
    dry = json.loads(ok(cli("--json", words[0], "--dry-run", *words[1:])).out)
    assert _state(config, home) == before, words  # nothing written, not even a lock file
    real = json.loads(ok(cli("--json", *words)).out)
    assert dry["dry_run"] is True and "dry_run" not in real
    assert dry["changed"] == real["changed"], (words, dry, real)
    after = config.read_bytes() if config.exists() else b""
    assert dry["diff"] == text_diff(config, before[0] or b"", after), words
    assert bool(dry["diff"]) == real["changed"], words
    return dry, real


def test_model_changes_dry_run_like_the_real_run(
    cli: Cli, config_path: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    steps = [
        ("set", "m", "ctx=4096", "env=A=1 B=2", "device=0, 1"),  # a fresh host: no config
        ("set", "m", "env=A=1  B=2", "device= 0,1"),  # the same values, written otherwise
        ("set", "m", "device=0,1"),
        ("set", "m", "ctx=8192"),
        ("unset", "m", "ctx"),
        ("unset", "m", "ctx"),
        ("unpin", "m"),
    ]
    results = [_dry_then_real(cli, config_path, home, *step) for step in steps]
    assert [real["changed"] for _, real in results] == [
        True,
        False,
        False,
        True,
        True,
        False,
        False,
    ]
    dry, _ = results[3]
    assert dry["message"] == 'would set ctx=8192 for "m"'
    assert "-    ctx: 4096\n+    ctx: 8192\n" in dry["diff"]
    # text: the sentence, then the diff
    shown = ok(cli("set", "--dry-run", "m", "ctx=1"))
    assert shown.out.startswith('would set ctx=1 for "m"\n--- ') and "+    ctx: 1\n" in shown.out
    # a refusal is the real run's refusal
    bad = cli("set", "--dry-run", "m", "ctx=-1")
    assert bad.code == 2 and bad.err.startswith("error: ")


def test_build_changes_dry_run_like_the_real_run(
    cli: Cli, config_path: Path, tmp_path: Path, mirror: MirrorServer, mirror_root: Path
) -> None:
    home = tmp_path / "home"
    for tag in ("b100", "b200"):
        publish_llama(mirror_root, tag, ["vulkan"])
        ok(cli("install", "llama-server", tag))
    ok(cli("pin", "m", "llama-server@b100-vulkan"))
    _dry_then_real(cli, config_path, home, "pin", "m", "llama-server@b200-vulkan")
    _dry_then_real(cli, config_path, home, "pin", "m", "llama-server@b200-vulkan")
    dry, real = _dry_then_real(cli, config_path, home, "activate", "llama-server@b200-vulkan")
    assert dry["message"].startswith("would activate") and real["changed"]
    _dry_then_real(cli, config_path, home, "activate", "llama-server@b200-vulkan")
    build = home / "builds" / "llama-server" / "b100-vulkan"
    assert build.is_dir()
    dry, real = _dry_then_real(cli, config_path, home, "uninstall", "llama-server@b100-vulkan")
    assert dry["removed"] is False and real["removed"] is True and not build.exists()
    # the refusals come first, as in the real run: the activated build while another is left
    refused = cli("uninstall", "--dry-run", "llama-server@b200-vulkan")
    assert refused.code == 1 and "--force" in refused.err
    kept = os.stat(config_path).st_mtime_ns
    assert ok(cli("uninstall", "--dry-run", "--force", "llama-server@b200-vulkan")).code == 0
    assert os.stat(config_path).st_mtime_ns == kept
    assert (home / "builds" / "llama-server" / "b200-vulkan").is_dir()
