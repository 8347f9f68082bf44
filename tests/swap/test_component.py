"""llama-swap as a component (issue 21, item 1): installed from a release of its real shape,
verified against its checksums file, smoke-checked with ``-version``, activated, updated,
pruned and locked like any build — and never a backend a model can use, nor a change to the
generated file."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from tests.support.cli import CliResult
from tests.support.swap import TAG, model_setup, needs_swap, ok, publish_swap

pytestmark = needs_swap


def test_install_update_prune_lock_and_no_change_to_the_generated_file(
    tmp_path: Path,
    config_path: Path,
    mirror: object,
    mirror_root: Path,
    swap_release: dict[str, bytes],
    cli: Callable[..., CliResult],
) -> None:
    model_setup(tmp_path, config_path)
    generated = json.loads(ok(cli("--json", "generate")).out)
    output = Path(generated["output"])
    before = output.read_bytes()
    publish_swap(mirror_root, swap_release)

    done = json.loads(ok(cli("--json", "install", "llama-swap")).out)
    assert (done["id"], done["activated"]) == (f"llama-swap@{TAG}-any", True)
    assert done["assets"][0]["name"] == "llama-swap_250_linux_amd64.tar.gz"
    assert done["assets"][0]["verified_by"] in ("digest", "checksums")
    assert Path(done["path"]).name == "llama-swap"
    assert output.read_bytes() == before  # the install changed nothing llama-swap reads
    ok(cli("generate", "--check"))

    rows = {r["id"]: r for r in json.loads(ok(cli("--json", "backends")).out)}
    assert rows["llama-swap"]["classes"] == [] and rows["llama-swap"]["default"] is False
    models = json.loads(ok(cli("--json", "models")).out)
    assert {m["backend"]["id"] for m in models} == {"one"}
    pin = cli("pin", "alpha-q4_k_m", "llama-swap")
    assert pin.code == 1 and '"llama-swap" serves no model' in pin.err
    star = cli("default", "llama-swap")
    assert star.code == 1 and "serves no model" in star.err
    assert output.read_bytes() == before

    # a newer release: update installs and activates it, prune removes the old one
    publish_swap(mirror_root, swap_release, tag="v251")
    ok(cli("update", "llama-swap"))
    listed = {b["id"]: b for b in json.loads(ok(cli("--json", "list", "llama-swap")).out)}
    assert listed["llama-swap@v251-any"]["activated"] is True
    ok(cli("prune", "llama-swap"))
    assert list(json.loads(ok(cli("--json", "list", "llama-swap")).out)) == [
        listed["llama-swap@v251-any"]
    ]
    lock = tmp_path / "backendmgr.lock"
    ok(cli("lock", "--output", str(lock)))
    assert "llama-swap@v251-any" in lock.read_text()
    assert output.read_bytes() == before
