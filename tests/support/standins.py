"""Stand-in programs the tests install or point rows at, in place of the real servers."""

from __future__ import annotations

import sys
from pathlib import Path

# Shaped like llama-server's own --help (b11xxx): option column, metavar, two spaces, prose.
NEW_HELP = """\
----- common params -----

-h,    --help, --usage                  print usage and exit
--version                               show version and build info
-t,    --threads N                      number of threads to use during generation
                                        (env: LLAMA_ARG_THREADS)
-c,    --ctx-size N                     size of the prompt context (default: 4096, 0 = loaded
                                        from model); see also --rope-scale and -fa
-fa,   --flash-attn [on|off|auto]       set Flash Attention use ('on', 'off', or 'auto')
--list-devices                          print list of available devices and exit
-ngl,  --gpu-layers, --n-gpu-layers N   max. number of layers to store in VRAM
-m,    --model FNAME                    model path to load
--mmproj FILE                           path to a multimodal projector file
--jinja                                 use jinja template for chat (default: enabled)
--embedding, --embeddings               restrict to only support embedding use case
--pooling {none,mean,cls,last,rank}     pooling type for embeddings
--reranking, --rerank                   enable reranking endpoint on server
--host HOST                             ip address to listen on
--port PORT                             port to listen (default: 8080)
"""
OLD_HELP = """\
-h,    --help, --usage                  print usage and exit
-c,    --ctx-size N                     size of the prompt context
-ngl,  --gpu-layers N                   max. number of layers to store in VRAM
-m,    --model FNAME                    model path
--embedding                             restrict to only support embedding use case
--host HOST                             ip address to listen on
--port PORT                             port to listen (default: 8080)
"""

# A llama-server stand-in that serves, for ``verify`` and the page's Verify button: answers
# --help and --version as the capability probe and smoke check ask, then /health, chat,
# embeddings and rerank on the --port it is given. Its own arguments (so a model's extra_args)
# can make it crash at start (--fake-mode crash), never become healthy (never), answer 500,
# answer 200 with no JSON (garbage),
# ignore SIGTERM (stubborn), or start a child as vLLM does (--fake-child 1); with FAKE_DIR set
# it notes its pids and the requests it got there.
SERVER_STANDIN = r"""
import json, os, signal, subprocess, sys, time
from http.server import BaseHTTPRequestHandler, HTTPServer

args = sys.argv[1:]
if args[:1] == ["--help"]:
    print("usage: llama-server [options]\n  --jinja\n  --embedding\n  --reranking\n"
          "  --pooling {none,mean,cls,last,rank}\n  --mmproj FNAME\n  -fa, --flash-attn")
    sys.exit(0)
if args[:1] == ["--version"]:
    print("version: 11434 (abcdef0)")
    sys.exit(0)
if args[:1] == ["serve"]:  # vllm serve MODEL ...
    args = args[2:]

def opt(name, default=None):
    return args[args.index(name) + 1] if name in args else default

piddir = os.environ.get("FAKE_DIR")
def note(name, text):
    if piddir:
        with open(os.path.join(piddir, name), "a") as fh:
            fh.write(text + "\n")

note("pids", str(os.getpid()))
if opt("--fake-child"):
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    note("pids", str(child.pid))
mode = opt("--fake-mode", "ok")
print("llama_model_load: loading model", flush=True)
if mode == "crash":
    for i in range(40):
        print(f"noise line {i} " + "x" * 500, flush=True)
    print("error: failed to load model '/m/broken.gguf'", file=sys.stderr, flush=True)
    sys.exit(3)
if mode == "stubborn":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)

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

    def do_GET(self):
        if self.path == opt("--fake-health", "/health"):
            if mode == "never":
                self.send(503, {"error": {"message": "Loading model"}})
            else:
                self.send(200, {"status": "ok"})
        else:
            self.send(404, {"error": "no " + self.path})

    def do_POST(self):
        n = min(int(self.headers.get("Content-Length") or 0), 1 << 16)
        req = json.loads(self.rfile.read(n) or b"{}")
        note("requests", json.dumps([self.path, req]))
        if mode == "500":
            self.send(500, {"error": {"message": "CUDA error: out of memory"}})
        elif mode == "garbage":  # a 200 that is no answer at all
            body = b"<html>it works</html>"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        elif self.path == "/v1/chat/completions":
            self.send(200, {"choices": [{"message": {"role": "assistant", "content": "OK"}}]})
        elif self.path == "/v1/embeddings":
            self.send(200, {"data": [{"embedding": [0.1, 0.2]}]})
        elif self.path == "/v1/rerank":
            self.send(200, {"results": [{"index": 0, "relevance_score": 0.9}]})
        else:
            self.send(404, {"error": "no " + self.path})

HTTPServer(("127.0.0.1", int(opt("--port"))), Handler).serve_forever()
"""


def hanging_server(pids: Path, *, ignore_term: bool = False) -> bytes:
    """A llama-server that records its pid, starts a child that records its own, and hangs:
    the child sits in the foreground, so only a kill of the whole group reaches it. With
    ``ignore_term`` both ignore SIGTERM, so only SIGKILL ends them."""
    return (
        "#!/bin/sh\n" + ("trap '' TERM\n" if ignore_term else "") + f'echo "$$" >> "{pids}"\n'
        f'sh -c \'echo "$$" >> "{pids}"; exec sleep 300\'\n'
        'echo "version: 100 (b100)"\n'
    ).encode()


# A stand-in nvidia-smi: 6462 MiB for each pid in $FAKE_DIR/pids, one other process not ours.
NVIDIA_SMI = r"""
import os, sys
assert sys.argv[1:] == ["--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"]
print("1, 99999")  # another process on the card: not ours
for line in open(os.path.join(os.environ["FAKE_DIR"], "pids")):
    print(f"{line.strip()}, 6462")
print("garbage line")
"""


def python_exe(path: Path, body: str) -> Path:
    """``body`` as an executable Python script at ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!{sys.executable}\n{body}")
    path.chmod(0o755)
    return path
