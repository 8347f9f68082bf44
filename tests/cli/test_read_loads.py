"""What a read loads: only what its answer needs (issue 30). ``pin <TAB>`` lists the model ids
without the planner or the stores it reads; ``which MODEL`` plans that model without what
only ``models`` shows (verification, bench figures, the rows' result class) nor the digest
only ``generate`` writes."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.ggufs import write_gguf
from tests.support.startup import loaded_after

PLANNER = (
    "backendmgr.manager.models",
    "backendmgr.emit.plan",
    "backendmgr.measure.tuned",
    "backendmgr.measure.bench",
    "backendmgr.manager.verify_cache",
    "backendmgr.api_models.models",
)


def _home(tmp_path: Path) -> None:
    models = tmp_path / "models"
    for name in ("alpha", "beta"):
        write_gguf(models / f"{name}.gguf", "llama", layers=2, ctx=4096, size_bytes=1 << 20)
    config = tmp_path / "cfg" / "config.yaml"
    config.parent.mkdir()
    config.write_text(f"models_dirs: [{json.dumps(str(models))}]\n")


def test_tab_on_model_ids_loads_no_planner(tmp_path: Path) -> None:
    _home(tmp_path)
    out, loaded = loaded_after("__complete", "--", "pin", "", heavy=PLANNER)
    assert out.split() == ["alpha", "beta"]
    assert loaded == []


def test_which_model_plans_it_without_what_only_models_shows(tmp_path: Path) -> None:
    _home(tmp_path)
    shown = ("backendmgr.api_models.models", "backendmgr.emit.regen", "statistics")
    out, loaded = loaded_after("which", "beta", heavy=(*shown, "backendmgr.emit.plan"))
    assert "model → row" in out and loaded == ["backendmgr.emit.plan"]  # planned, nothing more
    out, loaded = loaded_after("models", heavy=shown)
    assert "alpha" in out and loaded == ["backendmgr.api_models.models"]
