"""The route table: one line per API operation, in the order the OpenAPI document lists them.
What each operation does is in ``handlers.py`` (its docstring is the summary); how a request
becomes a call and an answer is in ``http.py``."""

from __future__ import annotations

from .. import api_models as am
from .. import requests as rq
from ..swap.models import SwapStatus
from . import handlers as h
from .http import Op
from .openapi import serve_openapi

__all__ = ["ROUTES"]

GET, POST, DELETE = "GET", "POST", "DELETE"
BUILD, JOB, ROW = "/api/builds/{build}", "/api/jobs/{job}", "/api/backends/{row}"
MODEL = "/api/models/{model:path}"
LISTING = (("variant", "string"), ("refresh", "boolean"), ("limit", "integer"))
FORCE, COMPONENT = (("force", "boolean"),), (("component", "string"),)

ROUTES: tuple[Op, ...] = (
    Op(GET, "/api/catalog", h.catalog, am.CatalogEntry, many=True),
    Op(GET, "/api/releases/{component}", h.releases, am.ReleaseInfo, many=True, query=LISTING),
    Op(GET, "/api/builds", h.list_builds, am.BuildInfo, many=True, query=COMPONENT),
    Op(POST, "/api/builds", h.install, am.JobInfo, rq.InstallRequest, status=202),
    Op(POST, f"{BUILD}/activate", h.activate, am.ActivateResult, rq.ActivateRequest),
    Op(POST, "/api/canary", h.canary, am.JobInfo, rq.CanaryRequest, status=202),
    Op(DELETE, BUILD, h.uninstall_one, am.UninstallResult, query=FORCE),
    Op(POST, "/api/uninstall", h.uninstall, am.UninstallResult, rq.UninstallRequest),
    Op(POST, "/api/update", h.update, am.JobInfo, rq.UpdateRequest, status=202),
    Op(POST, "/api/prune", h.prune, am.PruneResult, rq.PruneRequest),
    Op(POST, "/api/cache/clean", h.cache_clean, am.CacheCleanResult, rq.CacheCleanRequest),
    Op(GET, "/api/jobs", h.list_jobs, am.JobInfo, many=True),
    Op(GET, JOB, h.get_job, am.JobInfo),
    Op(GET, f"{JOB}/events", h.job_events),
    Op(DELETE, JOB, h.cancel_job, am.JobInfo),
    Op(GET, "/api/backends", h.backends, am.BackendRowInfo, many=True),
    Op(POST, "/api/backends", h.add_backend, am.BackendRowResult, rq.AddBackendRequest),
    Op(DELETE, ROW, h.remove_backend, am.RemovedRow),
    Op(POST, f"{ROW}/default", h.set_default, am.BackendRowResult, rq.DefaultRequest),
    Op(GET, "/api/models", h.models, am.ModelInfo, many=True),
    Op(GET, f"{MODEL}/cmd", h.cmd, am.CmdResult),
    Op(POST, f"{MODEL}/pin", h.pin, am.PinResult, rq.PinRequest),
    Op(POST, f"{MODEL}/unpin", h.unpin, am.PinResult, rq.UnpinRequest),
    Op(POST, f"{MODEL}/set", h.set_overrides, am.ModelSettingsResult, rq.SetRequest),
    Op(POST, f"{MODEL}/unset", h.unset_overrides, am.ModelSettingsResult, rq.UnsetRequest),
    Op(GET, "/api/generate", h.generated, am.GeneratedText),
    Op(GET, "/api/status", h.swap_status, SwapStatus),
    Op(POST, "/api/generate", h.generate, am.GenerateResult, rq.GenerateRequest),
    Op(POST, "/api/lock", h.lock, am.LockResult),
    Op(POST, "/api/sync", h.sync, am.JobInfo, rq.SyncRequest, status=202),
    Op(POST, "/api/verify", h.verify, am.JobInfo, rq.VerifyRequest, status=202),
    Op(GET, "/api/doctor", h.doctor, am.DoctorReport),
    Op(POST, "/api/doctor", h.doctor_fix, am.DoctorReport, rq.DoctorRequest),
    Op(GET, "/api/which/{target:path}", h.which, am.WhichResult),
    Op(GET, "/api/config", h.config, am.ConfigInfo),
    Op(GET, "/api/openapi.json", serve_openapi),
)  # fmt: skip
