"""Stand-in inference servers that fail the way the real ones do.

One script, told how to behave by the ``BEHAVIOUR`` line the test writes at its top (so each
"build" is its own executable, as each installed build is):
- ``k``: bytes allocated and touched per token of the requested context (``-c`` for
  llama-server, ``--max-model-len`` for ``vllm serve``), so resident memory grows with it;
- ``oom_above``: a context above which it fails with llama.cpp's or vLLM's out-of-memory text;
- ``knows``: the model file stems it can load; any other gets the unknown-architecture error;
- ``fail``: ``lib`` (a missing shared library), ``port`` (the port taken), ``silent`` (exit
  at once, nothing said), ``hang`` (never healthy);
- ``delay``: seconds it loads before it serves (a slow start);
- ``name``: what ``$FAKE_DIR/starts`` calls it (its folder's name otherwise);
- ``timings``: what it reports as llama-server's ``timings`` on ``/completion`` (its speed:
  ``prompt_per_second``, ``predicted_per_second``), with the counts the request asked for;
- ``slow``: seconds each ``/completion`` (``/v1/completions`` for vLLM) takes;
- ``answer``: the exact text ``/completion`` answers instead (not JSON, a string's timings);
- ``drip``: ``/completion`` promises a long body and sends one byte of it every ``drip``
  seconds, forever (a per-read timeout never fires); ``drip_health`` does so on ``/health``;
- ``flood``: MiB of JSON that ``/completion`` answers (a megabyte printer);
- ``chatter``: MiB it prints on its output before it serves, half of it in one line.
Every process notes its pid in ``$FAKE_DIR/pids`` so a test can check none is left.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

__all__ = ["MEASURE_SERVER", "server_text", "write_server"]

MEASURE_SERVER = r"""
import json, os, sys, time
from http.server import BaseHTTPRequestHandler, HTTPServer

args = sys.argv[1:]
if args[:1] == ["--help"]:
    print("usage: llama-server [options]\n  -c, --ctx-size N\n  -t, --threads N\n  --jinja\n"
          "  --embedding\n"
          "  --reranking\n  --pooling {none,mean,cls,last,rank}")
    sys.exit(0)
if args[:1] == ["--version"]:
    print("version: 11434 (abcdef0)")
    sys.exit(0)
vllm = args[:1] == ["serve"]
model = args[1] if vllm else None
if vllm:
    args = args[2:]

def opt(name, default=None):
    return args[args.index(name) + 1] if name in args else default

model = model or opt("-m", "")
stem = os.path.basename(model.rstrip("/")).split(".")[0]
piddir = os.environ.get("FAKE_DIR")
if piddir:
    with open(os.path.join(piddir, "pids"), "a") as fh:
        fh.write(f"{os.getpid()}\n")
    with open(os.path.join(piddir, "starts"), "a") as fh:
        here = os.path.dirname(os.path.abspath(sys.argv[0]))
        row = BEHAVIOUR.get("name") or os.path.basename(here)
        fh.write(json.dumps([row, stem, args]) + "\n")

def die(*lines, status=1):
    for line in lines:
        print(line, file=sys.stderr, flush=True)
    sys.exit(status)

fail = BEHAVIOUR.get("fail")
if fail == "lib":
    die(f"{sys.argv[0]}: error while loading shared libraries: libcudart.so.12: cannot open "
        "shared object file: No such file or directory", status=127)
if fail == "silent":
    sys.exit(1)
port = int(opt("--port"))
print("build: 11434 (abcdef0) with cc (GCC) 13.2.0 for x86_64-linux-gnu", flush=True)
if fail == "port":
    print("main: HTTP server is listening, hostname: 127.0.0.1, port: %d" % port)
    die("start: couldn't bind HTTP server socket, hostname: 127.0.0.1, port: %d" % port,
        "main: exiting due to HTTP server error")
knows = BEHAVIOUR.get("knows")
if knows is not None and stem not in knows:
    if vllm:
        die("Traceback (most recent call last):",
            "  File \"vllm/model_executor/models/registry.py\", line 512, in inspect_model_cls",
            f"ValueError: Model architectures ['{stem.capitalize()}ForCausalLM'] are not "
            "supported for now. Supported architectures: dict_keys(['LlamaForCausalLM'])")
    die(f"llama_model_loader: loaded meta data with 24 key-value pairs from {model}",
        f"llama_model_load: error loading model: error loading model architecture: "
        f"unknown model architecture: '{stem}'",
        "llama_model_load_from_file_impl: failed to load model",
        f"common_init_from_params: failed to load model '{model}'",
        "main: exiting due to model loading error")
ctx = int(opt("--max-model-len") if vllm else opt("-c", "4096"))
limit = BEHAVIOUR.get("oom_above")
if limit is not None and ctx > limit:
    need = ctx * 2048 / 2**20
    if vllm:
        die("ERROR [core.py:700] EngineCore failed to start.",
            f"ValueError: The model's max seq len ({ctx}) is larger than the maximum number "
            f"of tokens that can be stored in KV cache ({limit}). Try increasing "
            "`gpu_memory_utilization` or decreasing `max_model_len` when initializing "
            "the engine.",
            *[f"  File \"vllm/v1/engine/core.py\", line {700 + i}, in run_engine_core"
              for i in range(30)],  # the root cause is far above the last lines
            "RuntimeError: Engine core initialization failed. See root cause above.")
    die(f"llama_kv_cache: {'CUDA0'} KV buffer size = {need:.2f} MiB",
        f"ggml_backend_cuda_buffer_type_alloc_buffer: allocating {need:.2f} MiB on device 0: "
        "cudaMalloc failed: out of memory",
        f"alloc_tensor_range: failed to allocate CUDA0 buffer of size {ctx * 2048}",
        "llama_init_from_model: failed to initialize the context: failed to allocate buffer "
        "for kv cache",
        f"common_init_from_params: failed to create context with model '{model}'",
        "main: exiting due to model loading error")
held = b"\x01" * (ctx * BEHAVIOUR.get("k", 0))  # written, so resident
for _ in range(BEHAVIOUR.get("chatter", 0)):
    sys.stdout.write("x" * (1 << 19))  # half a MiB without a newline
    sys.stdout.write(("log line\n" * 58254)[: 1 << 19])
sys.stdout.flush()
time.sleep(BEHAVIOUR.get("delay", 0))

class Handler(BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def send(self, code, data):
        body = json.dumps(data).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def drip(self, every):
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(1 << 30))
        self.end_headers()
        while True:
            self.wfile.write(b" ")
            self.wfile.flush()
            time.sleep(every)

    def do_GET(self):
        if self.path == "/health" and "drip_health" in BEHAVIOUR:
            self.drip(BEHAVIOUR["drip_health"])
        elif self.path == "/health" and fail != "hang":
            self.send(200, {"status": "ok"})
        else:
            self.send(503, {"error": {"message": "Loading model"}})

    def do_POST(self):
        n = min(int(self.headers.get("Content-Length") or 0), 1 << 16)
        body = self.rfile.read(n)
        if self.path == "/v1/chat/completions":
            self.send(200, {"choices": [{"message": {"role": "assistant", "content": "OK"}}]})
        elif self.path == "/v1/completions" and vllm:  # vLLM's usage, timed by the caller
            asked = json.loads(body or b"{}")
            time.sleep(BEHAVIOUR.get("slow", 0))
            usage = {"prompt_tokens": len(str(asked.get("prompt", "")).split()),
                     "completion_tokens": asked.get("max_tokens", 0)}
            self.send(200, {"choices": [{"text": "x"}], "usage": usage})
        elif self.path == "/completion" and "drip" in BEHAVIOUR:
            self.drip(BEHAVIOUR["drip"])
        elif self.path == "/completion" and "answer" in BEHAVIOUR:
            raw = BEHAVIOUR["answer"].encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)
        elif self.path == "/completion" and "flood" in BEHAVIOUR:
            chunk = b'{"x": "' + b"y" * (1 << 20)
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()  # no length: the body ends when the connection closes
            for _ in range(BEHAVIOUR["flood"]):
                self.wfile.write(chunk)
            self.wfile.write(b'"}')
            self.close_connection = True
        elif self.path == "/completion" and "timings" in BEHAVIOUR:
            time.sleep(BEHAVIOUR.get("slow", 0))
            asked = json.loads(body or b"{}")
            timings = {"prompt_n": len(str(asked.get("prompt", "")).split()),
                       "predicted_n": asked.get("n_predict", 0), **BEHAVIOUR["timings"]}
            self.send(200, {"content": "x", "timings": timings})
        elif self.path == "/v1/embeddings":
            self.send(200, {"data": [{"embedding": [0.1, 0.2]}]})
        else:
            self.send(404, {"error": "no " + self.path})

HTTPServer(("127.0.0.1", port), Handler).serve_forever()
"""


def server_text(**behaviour: Any) -> str:
    """The stand-in's program text, behaving as ``behaviour`` says (for an archive, too)."""
    head = f"#!{sys.executable}\nBEHAVIOUR = {json.dumps(behaviour)!r}\n"
    head += "import json as _j\nBEHAVIOUR = _j.loads(BEHAVIOUR)\n"
    return head + MEASURE_SERVER


def write_server(path: Path, **behaviour: Any) -> Path:
    """An executable stand-in at ``path`` that behaves as ``behaviour`` says."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(server_text(**behaviour))
    path.chmod(0o755)
    return path
