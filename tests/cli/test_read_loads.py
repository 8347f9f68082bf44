"""What a read loads: only what its answer needs (issue 30). ``pin <TAB>`` lists the model ids
without the planner or the stores it reads; ``which MODEL`` plans that model without what
only ``models`` shows (verification, bench figures, the rows' result class) nor the digest
only ``generate`` writes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

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
    # nor the services, ``which``'s resolver and result class, or the rows' rules (packaging)
    services = ("backendmgr.manager.services", "backendmgr.manager.which", "packaging.version")
    assert loaded_after("__complete", "--", "pin", "", heavy=services) == (out, [])


def test_which_model_plans_it_without_what_only_models_shows(tmp_path: Path) -> None:
    _home(tmp_path)
    shown = ("backendmgr.api_models.models", "backendmgr.emit.regen", "statistics")
    out, loaded = loaded_after("which", "beta", heavy=(*shown, "backendmgr.emit.plan"))
    assert "model → no row" in out and loaded == ["backendmgr.emit.plan"]  # planned, nothing more
    out, loaded = loaded_after("models", heavy=shown)
    assert "alpha" in out and loaded == ["backendmgr.api_models.models"]


def test_which_model_on_a_home_that_measured_nothing_loads_no_record_class(
    tmp_path: Path,
) -> None:
    """Nothing tuned, verified or probed from PATH: ``which`` plans without the tuned records'
    module, OpenSSL's hashes, the versions' ordering, the GGUF reader (the headers are cached by
    the first read) nor ``config``'s result."""
    _home(tmp_path)
    loaded_after("models")  # writes the header cache
    unused = (
        "backendmgr.measure.tuned",
        "hashlib",
        "packaging.version",
        "backendmgr.discovery.gguf",
        "backendmgr.api_models.config",
    )
    out, loaded = loaded_after("which", "beta", heavy=unused)
    assert "model → no row" in out and loaded == []


WRITING = (
    "backendmgr.install.store",  # staging, commit, removal, tidying
    "tempfile",
    "filelock",
    "backendmgr.net",
)
"""What only installs, removals and the network need: no read loads it (issue 30)."""


def _build(home: Path) -> None:
    """A committed build, as an install leaves it: its folder, its executable, its receipt."""
    from backendmgr.install.receipt import RECEIPT, Receipt, receipt_json

    folder = home / "builds" / "llama-server" / "b100-cpu"
    (folder / "bin").mkdir(parents=True)
    (folder / "bin" / "llama-server").write_text("#!/bin/sh\n")
    receipt = Receipt(
        component="llama-server",
        version="b100",
        variant="cpu",
        source="github",
        exe="bin/llama-server",
        kind="llama",
        installed_at="2026-01-02T03:04:05+00:00",
        backendmgr_version="0",
    )
    (folder / RECEIPT).write_text(receipt_json(receipt))


@pytest.mark.parametrize(
    "argv",
    [
        ("list",),
        ("backends",),
        ("which", "beta"),
        ("models",),
        ("__complete", "--", "pin", ""),
    ],
    ids=["list", "backends", "which", "models", "pin-TAB"],
)
def test_a_read_loads_not_the_build_stores_writing_half(
    tmp_path: Path, argv: tuple[str, ...]
) -> None:
    _home(tmp_path)
    _build(tmp_path / "home")
    loaded_after("list")  # the config's first read parses and keeps it (the YAML library)
    out, loaded = loaded_after(*argv, heavy=WRITING)
    assert out.strip() and loaded == []
    if argv[0] == "list":
        assert "llama-server@b100-cpu" in out  # the build was read, receipt and all


def test_which_plans_without_the_bench_store_or_the_verify_cache(tmp_path: Path) -> None:
    _home(tmp_path)
    only_models = ("backendmgr.measure.bench", "backendmgr.manager.verify_cache")
    out, loaded = loaded_after("which", "beta", heavy=(*only_models, "backendmgr.catalog.manifest"))
    assert "model → no row" in out and loaded == []  # "is beta a component?": the files' names
    out, loaded = loaded_after("models", heavy=only_models)
    # ``models`` reads the verify cache; the bench records' module only where bench.json holds
    # figures (none here: tests/measure/test_bench.py shows them)
    assert loaded == ["backendmgr.manager.verify_cache"]
