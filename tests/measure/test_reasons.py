"""Every row of the failure table against a real-looking log (as verify words a failure: the
exit status, then the last lines joined by `` | ``), plus the fixes and what stays unknown."""

from __future__ import annotations

import dataclasses

import pytest

from backendmgr.catalog.host import Adapter, Host
from backendmgr.config.models import BackendRow, ModelOverride, Settings
from backendmgr.discovery.models import DiscoveredModel
from backendmgr.measure.diagnose import failure_cause, newer_row, other_rows, repair_order
from backendmgr.measure.reasons import CAUSES, classify, explain
from backendmgr.registry.resolve import resolve


def log(*lines: str, status: int = 1) -> str:
    return f"exited with status {status}: " + " | ".join(lines)


LOGS: list[tuple[str, str, dict[str, str]]] = [
    (
        "port-in-use",
        log(
            "main: HTTP server is listening, hostname: 127.0.0.1, port: 41234",
            "start: couldn't bind HTTP server socket, hostname: 127.0.0.1, port: 41234",
            "main: exiting due to HTTP server error",
        ),
        {"port": "41234"},
    ),
    (
        "port-in-use",
        log(
            "ERROR 12-01 10:00:00 [api_server.py:1234] OSError: [Errno 98] error while "
            "attempting to bind on address ('127.0.0.1', 8000): address already in use"
        ),
        {},
    ),
    (
        "missing-library",
        log(
            "/h/builds/llama-server/b11434-cuda/llama-server: error while loading shared "
            "libraries: libcudart.so.12: cannot open shared object file: No such file or directory",
            status=127,
        ),
        {"lib": "libcudart.so.12"},
    ),
    (
        "missing-library",
        log("ImportError: libhipblas.so.2: cannot open shared object file: No such file"),
        {"lib": "libhipblas.so.2"},
    ),
    (
        "unknown-architecture",
        log(
            "llama_model_load: error loading model: error loading model architecture: "
            "unknown model architecture: 'foo'",
            "llama_model_load_from_file_impl: failed to load model",
            "main: exiting due to model loading error",
        ),
        {"arch": "foo"},
    ),
    (
        "unknown-architecture",
        log(
            "ValueError: Model architectures ['FooForCausalLM'] are not supported for now. "
            "Supported architectures: dict_keys(['LlamaForCausalLM'])"
        ),
        {"arch": "FooForCausalLM"},
    ),
    (
        "model-missing",
        log(
            "gguf_init_from_file: failed to open GGUF file '/m/gone.gguf' (No such file or "
            "directory)",
            "llama_model_load: error loading model: llama_model_loader: failed to load model",
        ),
        {"path": "/m/gone.gguf"},
    ),
    (
        "model-unreadable",
        log("gguf_init_from_file: failed to open GGUF file '/m/locked.gguf' (Permission denied)"),
        {"path": "/m/locked.gguf"},
    ),
    (
        "model-unreadable",
        log("PermissionError: [Errno 13] Permission denied: '/m/hf/config.json'"),
        {"path": "/m/hf/config.json"},
    ),
    (
        "out-of-memory",
        log(
            "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 16384.00 MiB on device 0: "
            "cudaMalloc failed: out of memory",
            "alloc_tensor_range: failed to allocate CUDA0 buffer of size 17179869184",
            "llama_init_from_model: failed to initialize the context: failed to allocate "
            "buffer for kv cache",
        ),
        {},
    ),
    (
        "out-of-memory",
        log(
            "ggml_vulkan: Device memory allocation of size 1073741824 failed.",
            "vk::Device::allocateMemory: ErrorOutOfDeviceMemory",
        ),
        {},
    ),
    (
        "out-of-memory",
        log(
            "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 9000.00 MiB on device 0: "
            "hipMalloc failed: out of memory"
        ),
        {},
    ),
    (
        "out-of-memory",
        log(
            "ValueError: No available memory for the cache blocks. Try increasing "
            "`gpu_memory_utilization` when initializing the engine."
        ),
        {},
    ),
    (
        "out-of-memory",
        log(
            "ValueError: The model's max seq len (131072) is larger than the maximum number of "
            "tokens that can be stored in KV cache (52416). Try increasing "
            "`gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine."
        ),
        {},
    ),
    (
        "out-of-memory",
        log(
            "(EngineCore_DP0 pid=4242) ValueError: To serve at least one request with the "
            "models's max seq len (65536), (7.00 GiB KV cache is needed, which is larger than "
            "the available KV cache memory (3.00 GiB). Based on the available memory, the "
            "estimated maximum model length is 28000."
        ),
        {},
    ),
    (
        "out-of-memory",
        'HTTP 500 from /v1/rerank: {"error": {"message": "CUDA error: out of memory"}}',
        {},
    ),
    ("silent-exit", "exited with status 1", {}),
    ("silent-exit", "was killed by signal 9", {}),
    ("never-healthy", "not healthy within 300 s", {"seconds": "300"}),  # serve_check's words
    ("never-healthy", "not healthy within 2.5 s", {"seconds": "2.5"}),
]


@pytest.mark.parametrize(("code", "text", "found"), LOGS)
def test_each_log_names_its_cause(code: str, text: str, found: dict[str, str]) -> None:
    match = classify(text)
    assert match is not None, text
    assert match.cause.code == code
    assert dict(match.found) == found


def test_every_row_has_a_log() -> None:
    assert {c.code for c in CAUSES} == {code for code, _, _ in LOGS}


@pytest.mark.parametrize(
    "text",
    [
        None,
        "",
        "not healthy within 2 s: a log line",  # only serve_check's own words, whole
        log("error: failed to load model '/m/broken.gguf'", status=3),  # generic: no guess
        "exited with status 3: noise line | more noise",
    ],
)
def test_unrecognised_failures_keep_the_plain_reason(text: str | None) -> None:
    assert classify(text) is None


def test_fix_takes_the_first_template_it_can_fill_and_quotes_values() -> None:
    match = classify(log("unknown model architecture: 'foo'"))
    assert match is not None
    newer = explain(match, {"model": "my model", "component": "llama-server", "better": "b2"})
    assert newer.fix == "backendmgr pin 'my model' b2"
    assert newer.line == "this build does not know the model's architecture 'foo'"
    update = explain(match, {"model": "m", "component": "llama-server", "better": None})
    assert update.fix == "backendmgr update llama-server"
    assert explain(match, {"model": "m"}).fix == "backendmgr catalog"
    oom = classify(log("cudaMalloc failed: out of memory"))
    assert oom is not None and oom.cause.memory
    assert explain(oom, {"model": "q;rm -rf /"}).fix == "backendmgr tune 'q;rm -rf /'"


def _rows() -> list[BackendRow]:
    def build(version: str, kind: str = "llama") -> BackendRow:
        comp = "llama-server" if kind == "llama" else "vllm"
        return BackendRow(
            id=f"{comp}@{version}-cpu",
            kind=kind,
            path=f"/b/{version}",
            managed=True,
            component=comp,
            version=version,
            variant="cpu",
            build=True,
        )

    return [
        BackendRow(id="manual", kind="llama", path="/m/llama-server"),
        BackendRow(  # the component's row: follows activation, never a repair's pin
            id="llama-server",
            kind="llama",
            path="/b/b10000",
            managed=True,
            component="llama-server",
            version="b10000",
            variant="cpu",
        ),
        build("b900"),
        build("b10000"),
        build("0.10.0", "vllm"),
        BackendRow(id="sd", kind="sd", path="/m/sd-server"),
        build("b9500"),
    ]


def test_other_rows_are_builds_newest_first_then_manual_rows() -> None:
    settings = Settings(backends=_rows())
    chat = DiscoveredModel(id="q", path="/m/q.gguf", format="gguf")
    current = settings.row("llama-server@b9500-cpu")
    ids = [r.id for r in other_rows(settings, chat, current)]
    assert ids == ["llama-server@b10000-cpu", "llama-server@b900-cpu", "vllm@0.10.0-cpu", "manual"]
    # on the component's row, its activated build (same executable) is not tried again
    active = settings.row("llama-server")
    ids = [r.id for r in other_rows(settings, chat, active)]
    assert ids == ["llama-server@b9500-cpu", "llama-server@b900-cpu", "vllm@0.10.0-cpu", "manual"]
    embed = DiscoveredModel(id="e", path="/m/e.gguf", format="gguf", role="embedding")
    assert "vllm@0.10.0-cpu" not in [r.id for r in other_rows(settings, embed, current)]
    hf = DiscoveredModel(id="h", path="/m/h", format="hf")
    assert [r.id for r in other_rows(settings, hf, None)] == ["vllm@0.10.0-cpu"]
    assert newer_row(settings, chat, current) is not None
    newest = settings.row("llama-server@b10000-cpu")
    assert newer_row(settings, chat, newest) is None


def test_failure_cause_names_a_newer_build_or_the_update() -> None:
    settings = Settings(backends=_rows())
    chat = DiscoveredModel(id="q", path="/m/q.gguf", format="gguf")
    text = log("unknown model architecture: 'qwen9'")
    old = resolve(dataclasses.replace(settings, models={}), settings.override("q"), "llm")
    cause = failure_cause(settings, chat, old, text)  # resolves to the manual row (first)
    assert cause is not None and cause.code == "unknown-architecture"
    assert cause.fix == "backendmgr pin q llama-server@b10000-cpu"
    pinned = dataclasses.replace(
        settings, models={"q": ModelOverride(backend="llama-server@b10000-cpu")}
    )
    newest = resolve(pinned, pinned.override("q"), "llm")
    cause = failure_cause(pinned, chat, newest, text)
    assert cause is not None and cause.fix == "backendmgr update llama-server"


def _variant(version: str, variant: str) -> BackendRow:
    return BackendRow(
        id=f"llama-server@{version}-{variant}",
        kind="llama",
        path=f"/b/{version}-{variant}",
        managed=True,
        component="llama-server",
        version=version,
        variant=variant,
        build=True,
    )


def _host(*adapters: Adapter) -> Host:
    return Host("linux", "x64", adapters, None, ())


def test_repair_order_prefers_the_activated_build_then_what_the_host_can_use() -> None:
    rows = [
        BackendRow(id="manual", kind="llama", path="/m/llama-server"),
        BackendRow(
            id="llama-server",
            kind="llama",
            path="/b/b100-cpu",
            managed=True,
            component="llama-server",
            version="b100",
            variant="cpu",
        ),
        _variant("b100", "cpu"),
        _variant("b200", "vulkan"),
        _variant("b200", "cuda-13.4"),
        _variant("b200", "rocm-10.0"),
        _variant("b150", "cpu"),
    ]
    settings = Settings(backends=rows)
    chat = DiscoveredModel(id="q", path="/m/q.gguf", format="gguf")

    def order(host: Host) -> list[str]:
        return [
            r.id.removeprefix("llama-server@") for r, _ in repair_order(settings, chat, None, host)
        ]

    assert order(_host()) == [
        "b100-cpu",
        "b150-cpu",
        "manual",
        "b200-vulkan",
        "b200-cuda-13.4",
        "b200-rocm-10.0",
    ]
    nvidia = _host(Adapter("NVIDIA GeForce RTX 4090", "nvidia"))
    assert order(nvidia) == [  # in one release, the host's own API first
        "b100-cpu",
        "b200-cuda-13.4",
        "b200-vulkan",
        "b150-cpu",
        "manual",
        "b200-rocm-10.0",
    ]
    amd = _host(Adapter("AMD Radeon RX 7900 XTX", "amd"))
    assert order(amd)[-1] == "b200-cuda-13.4" and order(amd)[1:3] == [
        "b200-vulkan",
        "b200-rocm-10.0",
    ]
    whys = dict((r.id, why) for r, why in repair_order(settings, chat, None, _host()))
    assert whys["llama-server@b100-cpu"] == "the activated build of llama-server"
    assert whys["llama-server@b150-cpu"] == (
        "a cpu build, which this host can use (no GPU adapter found)"
    )
    assert whys["llama-server@b200-cuda-13.4"] == (
        "a cuda-13.4 build, tried last: no GPU adapter found for cuda"
    )
    # an activated GPU build this host cannot use is no first choice
    gpu_active = [
        dataclasses.replace(r, variant="cuda-13.4", path="/b/b200-cuda-13.4", version="b200")
        if r.id == "llama-server"
        else r
        for r in rows
    ]
    first, why = repair_order(Settings(backends=gpu_active), chat, None, _host())[0]
    assert first.id == "llama-server@b150-cpu" and why.startswith("a cpu build")  # newest
