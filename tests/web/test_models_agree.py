"""The CLI's ``--json`` and the API answer with the same typed result for every command: each
document validates against it (by pydantic, as the OpenAPI document's schema says), carries no
key it does not name, and the two agree."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import TypeAdapter

from backendmgr import api_models as am
from backendmgr.mirror import MirrorServer
from backendmgr.swap.models import SwapStatus
from tests.support import Setup, publish_llama
from tests.support.cli import run_in_worker
from tests.support.web import finished, sse

MODEL = "qwen3-8b-q4_k_m"


async def cli_json(*args: str) -> Any:
    """``backendmgr ARGS --json`` through ``main()``, in a worker thread of this process."""
    shown = await run_in_worker("--json", *args)
    assert shown.code == 0, (args, shown.err)
    return json.loads(shown.out)


def checked(model: type[Any], document: Any) -> list[Any]:
    items = document if isinstance(document, list) else [document]
    out = []
    for item in items:
        assert am.extra_keys(model, item) == [], (model.__name__, am.extra_keys(model, item))
        out.append(TypeAdapter(model).validate_python(item))
    return out


def same(cli_doc: Any, api_doc: Any) -> None:
    """Equal, but for what differs by nature between two runs (an install's timestamp)."""

    def strip(doc: Any) -> Any:
        if isinstance(doc, list):
            return [strip(d) for d in doc]
        return {k: v for k, v in doc.items() if k != "installed_at"}

    assert strip(cli_doc) == strip(api_doc)


@pytest.mark.asyncio
async def test_every_command_json_validates_against_the_api_model(
    mirror: MirrorServer, mirror_root: Path, client: httpx.AsyncClient, setup: Setup
) -> None:
    publish_llama(mirror_root, "b100")
    publish_llama(mirror_root, "b90")
    # reads: the CLI and the API, the same model and the same data
    reads: list[tuple[list[str], str, type[Any]]] = [
        (["catalog"], "/api/catalog", am.CatalogEntry),
        (["releases", "llama-server"], "/api/releases/llama-server", am.ReleaseInfo),
        (["backends"], "/api/backends", am.BackendRowInfo),
        (["models"], "/api/models", am.ModelInfo),
        (["cmd", MODEL], f"/api/models/{MODEL}/cmd", am.CmdResult),
        (["doctor"], "/api/doctor", am.DoctorReport),
        (["which", MODEL], f"/api/which/{MODEL}", am.WhichResult),
        (["config", "show"], "/api/config", am.ConfigInfo),
        (["status"], "/api/status", SwapStatus),
    ]
    for argv, path, model in reads:
        doc = await cli_json(*argv)
        checked(model, doc)
        api = (await client.get(path)).json()
        checked(model, api)
        same(doc, api)

    # install: the CLI's document and the job's result
    installed = await cli_json("install", "llama-server", "b90")
    checked(am.InstallResult, installed)
    job = await client.post("/api/builds", json={"component": "llama-server", "version": "b100"})
    job_id = job.json()["id"]
    await sse(client, job_id)  # to its end
    state = await finished(client, job_id)
    assert state["state"] == "done", state
    checked(am.InstallResult, state["result"])
    assert set(state["result"]) == set(installed)  # one model: the same keys, message included
    assert installed["message"].startswith("installed llama-server@b90-vulkan and activated it")
    builds = await cli_json("list")
    checked(am.BuildInfo, builds)
    same(builds, (await client.get("/api/builds")).json())

    # changes: each made once by the CLI and once by the API, on the same state
    exe = setup.manual_exe
    changes: list[tuple[list[str], str, str, Any, type[Any]]] = [
        (["activate", "llama-server@b90-vulkan"], "POST",
         "/api/builds/llama-server@b90-vulkan/activate", {}, am.ActivateResult),
        (["backends", "add", "other", "--kind", "llama", "--path", str(exe)], "POST",
         "/api/backends", {"id": "other", "kind": "llama", "path": str(exe)}, am.BackendRowResult),
        (["default", "other"], "POST", "/api/backends/other/default", {}, am.BackendRowResult),
        (["pin", MODEL, "other"], "POST", f"/api/models/{MODEL}/pin", {"row": "other"},
         am.PinResult),
        (["set", MODEL, "ctx=4096", "extra_args=--seed 1"], "POST", f"/api/models/{MODEL}/set",
         {"values": {"ctx": "4096", "extra_args": "--seed 1"}}, am.ModelSettingsResult),
        (["unset", MODEL, "ctx"], "POST", f"/api/models/{MODEL}/unset", {"keys": ["ctx"]},
         am.ModelSettingsResult),
        (["unpin", MODEL], "POST", f"/api/models/{MODEL}/unpin", {}, am.PinResult),
        (["generate", "--force"], "POST", "/api/generate", {"force": True}, am.GenerateResult),
        (["backends", "remove", "other"], "DELETE", "/api/backends/other", None, am.RemovedRow),
        (["uninstall", "llama-server@b100-vulkan"], "DELETE",
         "/api/builds/llama-server@b100-vulkan", None, am.UninstallResult),
    ]  # fmt: skip
    for argv, method, path, body, model in changes:
        # the API first, then undo nothing: the CLI repeats it where repeating is allowed
        api_doc = await client.request(method, path, json=body)
        assert api_doc.status_code == 200, (path, api_doc.text)
        checked(model, api_doc.json())
        if argv[0] in ("backends", "uninstall"):
            continue  # not repeatable: the CLI's documents are checked below
        doc = await cli_json(*argv)
        checked(model, doc)
        # the same keys (a repeat may warn where the first did not, or keep a backup; it may
        # change nothing on disk, where the first said what it changed)
        assert "changes" in api_doc.json() or not api_doc.json()["changed"], argv  # issue 33
        shared = set(doc) - {"warnings", "backup", "changes"}
        assert shared == set(api_doc.json()) - {"warnings", "changes"}, argv
        assert isinstance(doc["message"], str) and isinstance(doc["changed"], bool), doc

    add = ["backends", "add", "o2", "--kind", "llama", "--path", str(exe)]
    checked(am.BackendRowResult, await cli_json(*add))
    checked(am.RemovedRow, await cli_json("backends", "remove", "o2"))
    checked(am.UninstallResult, await cli_json("uninstall", "llama-server@b90-vulkan", "--force"))


async def job_result(client: httpx.AsyncClient, job: httpx.Response) -> dict[str, Any]:
    assert job.status_code == 202, job.text
    job_id = job.json()["id"]
    await sse(client, job_id)  # to its end
    state = await finished(client, job_id)
    assert state["state"] == "done", state
    result: dict[str, Any] = state["result"]
    return result


@pytest.mark.asyncio
async def test_update_prune_and_cache_clean_agree_too(
    mirror: MirrorServer, mirror_root: Path, client: httpx.AsyncClient, setup: Setup
) -> None:
    publish_llama(mirror_root, "b90", published_at="2026-11-01T00:00:00Z")
    assert (await cli_json("install", "llama-server", "b90"))["id"] == "llama-server@b90-vulkan"
    publish_llama(mirror_root, "b100", published_at="2026-11-20T00:00:00Z")
    dry = await cli_json("update", "--dry-run")
    checked(am.UpdateResult, dry)
    api_dry = await job_result(client, await client.post("/api/update", json={"dry_run": True}))
    checked(am.UpdateResult, api_dry)
    same(dry, api_dry)
    assert api_dry["updates"][0]["from"] == "llama-server@b90-vulkan"
    done = await job_result(client, await client.post("/api/update", json={}))
    checked(am.UpdateResult, done)
    assert done["updates"][0]["action"] == "installed"
    assert (await client.post("/api/update", json={"components": ["nope"]})).status_code == 404

    pruned_dry = await cli_json("prune", "--dry-run")
    checked(am.PruneResult, pruned_dry)
    api_pruned = (await client.post("/api/prune", json={"dry_run": True})).json()
    checked(am.PruneResult, api_pruned)
    same(pruned_dry, api_pruned)
    assert api_pruned["removed"] == ["llama-server@b90-vulkan"]
    pruned = (await client.post("/api/prune", json={})).json()
    assert pruned["removed"] == ["llama-server@b90-vulkan"] and pruned["dry_run"] is False
    assert [b["id"] for b in (await client.get("/api/builds")).json()] == [
        "llama-server@b100-vulkan"
    ]
    bad = await client.post("/api/prune", json={"keep": -1})
    assert bad.status_code == 422 and bad.json()["exit"] == 2

    cleaned_dry = await cli_json("cache", "clean", "--dry-run")
    checked(am.CacheCleanResult, cleaned_dry)
    api_cleaned = (await client.post("/api/cache/clean", json={"dry_run": True})).json()
    checked(am.CacheCleanResult, api_cleaned)
    same(cleaned_dry, api_cleaned)
    cleaned = (await client.post("/api/cache/clean", json={})).json()
    assert cleaned["dry_run"] is False and cleaned["release_listings"]
