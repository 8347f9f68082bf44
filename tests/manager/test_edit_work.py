"""Issue 30: an edit (``pin``, ``unpin``, ``set``) does its work once. The models it names are
discovered and planned by the regeneration alone, whose plan also gives the edit's notes (a
model not found, a ctx above the trained one, an estimate over the budget); ``set`` reads the
values a person typed into the override pydantic would make, without loading pydantic."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from backendmgr.config.models import ModelOverride
from backendmgr.manager import Manager
from backendmgr.manager.values import override_of
from backendmgr.record import validate
from backendmgr.requests import PinRequest, SetRequest, UnpinRequest
from tests.support.ggufs import write_gguf
from tests.support.startup import loaded_after


def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Two small models and a manual row; the config's path."""
    for name in ("alpha", "beta"):
        write_gguf(tmp_path / "m" / f"{name}.gguf", "llama", layers=2, ctx=4096)
    config = tmp_path / "cfg" / "config.yaml"
    config.parent.mkdir()
    row = {"id": "mine", "kind": "llama", "path": "/usr/bin/true"}
    config.write_text(
        f"models_dirs: [{json.dumps(str(tmp_path / 'm'))}]\nbackends: [{json.dumps(row)}]\n"
    )
    monkeypatch.setenv("BACKENDMGR_CONFIG", str(config))
    monkeypatch.setenv("BACKENDMGR_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("BACKENDMGR_GPU", "none")
    monkeypatch.setenv("BACKENDMGR_VRAM_GB", "24")
    monkeypatch.setenv("HOME", str(tmp_path))  # no service installed
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    return config


def test_an_edit_discovers_and_plans_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _home(tmp_path, monkeypatch)
    from backendmgr.discovery import walk
    from backendmgr.manager.models import Models

    scans: list[int] = []
    plans: list[int] = []
    walked, piped = walk.discover, Models.pipeline

    def discover(*a: Any, **k: Any) -> Any:
        scans.append(1)
        return walked(*a, **k)

    def pipeline(*a: Any, **k: Any) -> Any:
        plans.append(1)
        return piped(*a, **k)

    monkeypatch.setattr(walk, "discover", discover)
    monkeypatch.setattr(Models, "pipeline", pipeline)
    mgr = Manager()

    async def edits() -> list[list[str]]:
        out = []
        for edit in (
            mgr.pin(PinRequest(model="alpha", row="mine")),
            mgr.unpin(UnpinRequest(model="alpha")),
            mgr.set_overrides(SetRequest(model="alpha", values={"ctx": "99999999"})),
            mgr.set_overrides(SetRequest(model="nosuch", values={"ctx": "512"})),
        ):
            scans.clear()
            plans.clear()
            result = await edit
            assert (len(scans), len(plans)) == (1, 1), result.message
            out.append(result.warnings)
        return out

    pinned, unpinned, above, missing = anyio.run(edits)
    assert pinned == [] and unpinned == []
    assert any("above the 4096 tokens alpha was trained with" in w for w in above)
    assert any("more than the 24 GiB" in w for w in above)  # the plan's own note
    assert missing == ['no discovered model "nosuch"; it is kept for when the model appears']

    # without a regeneration, the notes are still given (from a discovery of their own)
    async def quiet() -> list[str]:
        req = SetRequest(model="beta", values={"ctx": "99999999"}, generate=False)
        return (await mgr.set_overrides(req)).warnings

    warnings = anyio.run(quiet)
    assert any("above the 4096 tokens" in w for w in warnings)
    assert any("more than the 24 GiB" in w for w in warnings)


@pytest.mark.parametrize(
    "values",
    [
        {"ctx": "4096"},
        {"ctx": "0"},
        {"ctx": "-5"},
        {"ctx": "007"},
        {"ctx": " 42 "},
        {"ctx": "4_096"},
        {"ctx": "4096.0"},
        {"ctx": "1" * 30},
        {"vllm_gpu_util": "0.9"},
        {"vllm_gpu_util": "1"},
        {"vllm_gpu_util": "1.5"},
        {"vllm_gpu_util": "1e-1"},
        {"vram_target_gb": "0.30000000000000004"},
        {"vllm_tensor_parallel": "2"},
        {"unlisted": "true"},
        {"unlisted": "yes"},
        {"unlisted": "False"},
        {"unlisted": "maybe"},
        {"device": "1"},
        {"device": "0,1"},
        {"env": "A=1 B=2"},
        {"extra_args": "--seed 1"},
        {"vllm_tool_parser": "none"},
        {"llama_swap": {"aliases": ["x"]}},
        {"ctx": 4096, "vram_target_gb": 12.0, "unlisted": True, "env": ["A=1"]},  # as stored
    ],
)
def test_set_values_read_as_pydantic_reads_them(values: dict[str, Any]) -> None:
    """The strict read of the plain spellings makes what pydantic makes; whatever it does not
    take goes to pydantic, whose value or refusal ``set`` keeps."""
    try:
        wanted: ModelOverride | str = validate(ModelOverride, values)
    except ValueError as exc:
        wanted = type(exc).__name__ + str(exc)
    try:
        got: ModelOverride | str = override_of(values)
    except ValueError as exc:
        got = type(exc).__name__ + str(exc)
    assert got == wanted
    if isinstance(got, ModelOverride) and isinstance(wanted, ModelOverride):
        assert {k: type(v) for k, v in got.to_yaml().items()} == {
            k: type(v) for k, v in wanted.to_yaml().items()
        }


def test_an_edit_loads_only_what_it_uses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``set`` of a plain value loads no pydantic (a value pydantic must read still does, with
    its message); no edit loads what only ``activate``, the servers' requests or the GPU
    probe's host listing need, nor (no llama-swap runs, no service is installed) what reads
    ``up``'s record or writes the service's unit."""
    _home(tmp_path, monkeypatch)
    loaded_after("which", "alpha")  # the config's parse is kept: an edit validates it no more
    off = (
        "pydantic",
        "backendmgr.run_requests",
        "backendmgr.api_models.builds",
        "backendmgr.requests.builds",
        "backendmgr.catalog.host",
        "backendmgr.swap.status",
        "backendmgr.swap.unit",
        "backendmgr.swap.listen",
        "backendmgr.api_models.registry",  # the rows' results: pin's and set's are their own
    )
    for argv in (
        ("set", "alpha", "ctx=2048", "unlisted=true"),
        ("pin", "alpha", "mine"),
        ("unpin", "alpha"),
        ("unset", "alpha", "ctx"),
    ):
        out, loaded = loaded_after(*argv, heavy=off)
        assert out.strip() and loaded == [], argv
    out, loaded = loaded_after("set", "alpha", "ctx=0", heavy=("pydantic",))
    assert loaded == ["pydantic"]
    (tmp_path / "home" / "swap").mkdir()
    (tmp_path / "home" / "swap" / "up.json").write_text("{}")  # a record: it is read
    out, loaded = loaded_after("set", "alpha", "ctx=512", heavy=("backendmgr.swap.status",))
    assert "set ctx=512" in out and loaded == ["backendmgr.swap.status"]
