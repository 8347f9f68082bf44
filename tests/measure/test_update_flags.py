"""``update`` never breaks a model's flags (issue 32): before it activates the newest build,
each model that would move to it has its ``extra_args`` checked against the build's probed
options, through the real CLI and real installs from the loopback release mirror."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from backendmgr.mirror import MirrorServer
from tests.measure.test_bench import HELP, MIB
from tests.support import publish_llama
from tests.support.cli import Cli, error_line, ok
from tests.support.ggufs import write_gguf

OLD_HELP = HELP + "  -dio,  --direct-io          use direct I/O\n"  # -dio: gone at b200


def test_update_refuses_to_activate_a_build_that_drops_a_flag_a_model_uses(
    tmp_path: Path, cli: Cli, mirror: MirrorServer, mirror_root: Path, config_path: Path
) -> None:
    models = tmp_path / "models"
    for name in ("chat", "plain"):
        write_gguf(models / f"{name}.gguf", "qwen3", layers=4, ctx=8192, size_bytes=MIB)
    config_path.parent.mkdir(parents=True, exist_ok=True)
    settings = {"chat": {"extra_args": "-t 2 -dio"}, "plain": {"extra_args": "-t 2"}}
    config_path.write_text(json.dumps({"models_dirs": [str(models)], "models": settings}))
    day = "2026-09-0{}T00:00:00Z".format
    publish_llama(mirror_root, "b100", ["cpu"], help_text=OLD_HELP, published_at=day(1))
    ok(cli("install", "llama-server", "b100", "--variant", "cpu"))
    publish_llama(mirror_root, "b200", ["cpu"], help_text=HELP, published_at=day(2))
    output = config_path.parent / "llama-swap.yaml"

    def used() -> Any:  # the models' settings, the row they follow, and the generated config
        from ruamel.yaml import YAML

        doc = YAML(typ="safe").load(config_path.read_text())
        row = [r for r in doc["backends"] if r["id"] == "llama-server"]
        return doc["models"], row, output.read_text()

    before = used()

    def listed() -> dict[str, bool]:
        rows: list[dict[str, Any]] = json.loads(ok(cli("--json", "list")).out)
        return {r["id"]: r["activated"] for r in rows}

    refused = cli("update", "llama-server")
    assert error_line(refused) == (
        "error: chat: -dio is not an option of llama-server@b200-cpu (its extra_args); "
        "llama-server@b200-cpu is installed, not activated (update --force activates it anyway)"
    )  # exit 1, as activate refuses the same switch
    assert listed() == {"llama-server@b100-cpu": True, "llama-server@b200-cpu": False}
    assert used() == before  # the new build is installed (its own row), nothing else changed
    # installed now, its options are known: the dry run refuses as the run does
    assert error_line(cli("update", "--dry-run")) == error_line(refused)
    dry = ok(cli("update", "--dry-run", "--force"))
    assert "would activate llama-server@b200-cpu" in dry.out and "kept with --force" in dry.err
    assert used() == before

    # a model pinned to the old build does not move, so it does not refuse the update
    ok(cli("pin", "chat", "llama-server@b100-cpu"))
    moved = json.loads(ok(cli("--json", "update")).out)
    assert [u["action"] for u in moved["updates"]] == ["activated"]
    assert listed()["llama-server@b200-cpu"] is True
    ok(cli("activate", "llama-server@b100-cpu"))
    ok(cli("unpin", "chat"))

    # --force activates it, says which flag it kept, and the config notes it
    forced = cli("update", "llama-server", "--force")
    ok(forced)
    assert (
        "warning: kept with --force: chat: -dio is not an option of llama-server@b200-cpu"
        in forced.err
    )
    assert listed() == {"llama-server@b100-cpu": False, "llama-server@b200-cpu": True}
    assert "# NOTE extra_args -dio not listed by llama-server@b200-cpu --help" in output.read_text()
