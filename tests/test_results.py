"""The rules of a result's document (what ``--json`` prints and the API answers), held without
pydantic: only the keys the Manager set (given when made, or assigned since), ``class`` and
``from`` as SPEC §13 spells them, ``changed`` always and ``warnings`` only when there are any,
and ConfigInfo's settings whole."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
from pydantic import TypeAdapter

from backendmgr import api_models as am
from backendmgr.api_models import dump
from backendmgr.config.models import Settings
from backendmgr.results import Outcome

BUILD = {"id": "b", "component": "c", "version": "v", "variant": "x", "path": "/p"}


@pytest.mark.parametrize(
    ("result", "document"),
    [
        # Outcome: changed always (last when left at its default), warnings only when any
        (Outcome(message="m"), {"message": "m", "changed": True}),
        (Outcome(message="m", changed=False), {"message": "m", "changed": False}),
        (Outcome(message="m", warnings=[]), {"message": "m", "changed": True}),
        (Outcome(changed=True, message="m", warnings=["w"]), {"message": "m", "changed": True,
                                                              "warnings": ["w"]}),
        # a default the Manager gave is shown; one it left is not
        (am.VerifyResult(id="q", ok=True, reason=None, ready_s=1.5, gpu_gib=None,
                         est_vram_gb=None, backend=None),
         {"id": "q", "ok": True, "reason": None, "ready_s": 1.5, "gpu_gib": None,
          "est_vram_gb": None, "backend": None}),
        (am.VariantHere(id="v", available=True), {"id": "v", "available": True}),
        (am.VariantHere(id="v", available=True, runs_here=True, why_not=None),
         {"id": "v", "available": True, "runs_here": True, "why_not": None}),
        (am.DoctorReport(ok=True, problems=[], notes=[], fixed=[]),
         {"ok": True, "problems": [], "notes": [], "fixed": []}),
        # aliases
        (am.UpdateEntry(component="c", variant="x", from_=None, to="t", action="a"),
         {"component": "c", "variant": "x", "from": None, "to": "t", "action": "a"}),
        # nested results by the same rule
        (am.ModelInfo(id="m", path="/m", format="gguf", class_="llm", role=None, size_gb=1.0,
                      skipped=None, notes=[],
                      backend=am.ModelBackend(id=None, kind="llama", path=None, reason="r")),
         {"id": "m", "path": "/m", "format": "gguf", "class": "llm", "role": None,
          "size_gb": 1.0, "backend": {"id": None, "kind": "llama", "path": None, "reason": "r"},
          "skipped": None, "notes": []}),
        # fields of both bases, in pydantic's order: the later base's first
        (am.ActivateResult(message="m", dry_run=True, activated=True, **BUILD),
         {"message": "m", "dry_run": True, **BUILD, "activated": True, "changed": True}),
    ],
)  # fmt: skip
def test_a_document_has_the_keys_the_manager_set(result: Any, document: dict[str, Any]) -> None:
    shown = dump(result)
    assert shown == document
    assert list(shown) == list(document)  # the order --json prints
    assert json.loads(json.dumps(shown)) == shown
    assert dump([result, result]) == [document, document]


def test_a_field_assigned_later_is_set_even_to_its_default() -> None:
    result = am.InstallResult(message="m", activated=False, already_installed=False, assets=[],
                              **BUILD)  # fmt: skip
    assert "python" not in dump(result) and "fetch" not in dump(am.LockResult(
        message="m", path="p", builds=[], activated={}))  # fmt: skip
    result.python = None  # what install_source does when no interpreter was found
    result.warn("careful")
    result.changes = {"config": "/c"}
    shown = dump(result)
    assert shown["python"] is None and shown["changes"] == {"config": "/c"}
    assert list(shown)[-2:] == ["changed", "warnings"] and shown["warnings"] == ["careful"]
    result.warn()  # nothing to add: nothing changes
    assert dump(result) == shown


def test_a_whole_number_in_a_float_field_is_shown_as_a_float() -> None:
    result = am.VerifyResult(id="q", ok=True, reason=None, ready_s=1, gpu_gib=None,
                             est_vram_gb=None, budget_gb=16)  # fmt: skip
    assert dump(result)["ready_s"] == 1.0 and type(dump(result)["budget_gb"]) is float
    assert json.dumps(dump(result, every=True)["ready_s"]) == "1.0"
    report = am.BisectReport(message="m", model="q", metric="m", threshold=5, first_bad={},
                             last_good={}, releases=1, report="")  # fmt: skip
    assert json.dumps(dump(report)["threshold"]) == "5.0"


def test_yaml_scalars_are_dumped_as_plain_values() -> None:
    """A passthrough read from the config file keeps ruamel.yaml's scalar types; the document
    has their plain values, as pydantic's dump did (``true`` read as ScalarBoolean is 1)."""
    from ruamel.yaml.scalarbool import ScalarBoolean
    from ruamel.yaml.scalarfloat import ScalarFloat
    from ruamel.yaml.scalarint import HexInt
    from ruamel.yaml.scalarstring import SingleQuotedScalarString

    passthrough = {"aliases": [SingleQuotedScalarString("a")], "n": HexInt(16),
                   "f": ScalarFloat(1.5), "b": ScalarBoolean(True)}  # fmt: skip
    result = am.ModelSettingsResult(message="m", model="q", llama_swap=passthrough)
    shown = dump(result)["llama_swap"]
    assert shown == {"aliases": ["a"], "n": 16, "f": 1.5, "b": 1}
    assert [type(v) for v in (shown["aliases"][0], shown["n"], shown["f"], shown["b"])] == [
        str,
        int,
        float,
        int,
    ]


def test_config_info_shows_every_setting_and_every_shows_every_field() -> None:
    from backendmgr.record import plain

    settings = Settings()
    info = am.ConfigInfo(config="c", config_exists=False, output="o", home="h", builds="b",
                         downloads="d", cache="x", manifests="m", settings=settings)  # fmt: skip
    every = plain(settings)
    assert dump(info)["settings"] == every and "ttl" in every
    assert dump(info)["settings"] == dump(info, every=True)["settings"]
    bare = am.VariantHere(id="v", available=False)
    assert dump(bare, every=True) == {"id": "v", "available": False, "runs_here": True,
                                      "why_not": None}  # fmt: skip


def test_pydantic_reads_a_document_back_as_the_same_result() -> None:
    """The API's schema is pydantic's reading of these dataclasses: aliases, refusals."""
    model = am.ModelInfo(id="m", path="/m", format="gguf", class_=None, role=None, size_gb=None,
                         backend=None, skipped="why", notes=["n"])  # fmt: skip
    document = dump(model)
    read = TypeAdapter(am.ModelInfo).validate_python(document)
    assert dump(read, every=True) == dump(model, every=True) and dump(read)["class"] is None
    with pytest.raises(ValueError, match="Unexpected keyword argument"):
        TypeAdapter(am.ModelInfo).validate_python({**document, "clas": 1})
    assert am.extra_keys(am.ModelInfo, {**document, "clas": 1}) == ["clas"]
    nested = {**document, "backend": {"id": None, "kind": "k", "path": None, "reason": "r",
                                      "why": 1}}  # fmt: skip
    assert am.extra_keys(am.ModelInfo, nested) == ["backend.why"]
    with pytest.raises(TypeError):
        am.ModelInfo(id="m", misspelt=1)  # type: ignore[call-arg]


def test_results_import_no_pydantic() -> None:
    code = "import sys, backendmgr.results; assert 'pydantic' not in sys.modules, 'pydantic'"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
