#!/usr/bin/env python3
"""The offline demo behind ``scripts/demo``: three journeys against a local release mirror.

1. install the newest llama.cpp build, and an older one beside it (each build's --help is read
   at install: the older one lacks --jinja);
2. pin one model to the older build: its command loses --jinja, with a NOTE saying why;
3. activate another build: every model that is not pinned follows.

Everything lives in a temporary folder; the mirror runs as ``scripts/mirror.py`` on 127.0.0.1
and is stopped at the end.
"""

from __future__ import annotations

import difflib
import io
import json
import os
import struct
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REPO = "ggml-org/llama.cpp"


# What the stand-in prints for --help, shaped like llama-server's own. The older build predates
# --jinja (and the device listing); backendmgr reads this at install and leaves out what a
# build does not list.
HELP_OLD = """\
-h,    --help, --usage                  print usage and exit
--version                               show version and build info
-m,    --model FNAME                    model path
-c,    --ctx-size N                     size of the prompt context
-ngl,  --gpu-layers, --n-gpu-layers N   max. number of layers to store in VRAM
--mmproj FILE                           path to a multimodal projector file
--embedding, --embeddings               restrict to only support embedding use case
--host HOST                             ip address to listen on
--port PORT                             port to listen (default: 8080)
"""
HELP_NEW = (
    HELP_OLD
    + """\
-fa,   --flash-attn [on|off|auto]       set Flash Attention use
--list-devices                          print list of available devices and exit
--jinja                                 use jinja template for chat (default: enabled)
--pooling {none,mean,cls,last,rank}     pooling type for embeddings
--reranking, --rerank                   enable reranking endpoint on server
"""
)
DEVICES = {"vulkan": "Available devices:\n  Vulkan0: AMD Radeon RX 7900 XTX (24560 MiB)\n"}


def server_program(tag: str, variant: str, help_text: str) -> bytes:
    """A tiny llama-server stand-in: answers --version, --help and --list-devices, and needs
    its library like the real one."""
    devices = DEVICES.get(variant, "Available devices:\n")
    return (
        "#!/bin/sh\n"
        'here=$(dirname "$0")\n'
        '[ -e "$here/libggml.so.0" ] || { echo "libggml.so.0 missing" >&2; exit 127; }\n'
        f'if [ "$1" = "--help" ]; then cat <<\'END\'\n{help_text}END\nexit 0; fi\n'
        f'if [ "$1" = "--list-devices" ]; then cat <<\'END\'\n{devices}END\nexit 0; fi\n'
        f'if [ "$1" = "--version" ]; then echo "version: {tag[1:]} ({tag}) demo build"\n'
        "exit 0; fi\n"
        f'exec "{sys.executable}" "$here/demo-server.py" "$@"\n'  # serving: see DEMO_SERVER
    ).encode()


# What the stand-in runs when llama-swap (or `backendmgr verify`) starts it: an OpenAI-shaped
# server on --port that is healthy at once and answers every completion with "hello".
DEMO_SERVER = b"""\
import json, sys
from http.server import BaseHTTPRequestHandler, HTTPServer

class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def answer(self, body):
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self.answer({"status": "ok"})

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        reply = {"role": "assistant", "content": "hello"}
        self.answer({"object": "chat.completion", "choices": [{"index": 0, "message": reply}]})

port = int(sys.argv[sys.argv.index("--port") + 1])
HTTPServer(("127.0.0.1", port), Handler).serve_forever()
"""


def tarball(tag: str, variant: str, help_text: str) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:

        def add(name: str, data: bytes = b"", *, link: str = "", mode: int = 0o644) -> None:
            info = tarfile.TarInfo(f"build/bin/{name}")
            info.mode = mode
            if link:
                info.type, info.linkname = tarfile.SYMTYPE, link
                tf.addfile(info)
            else:
                info.size = len(data)
                tf.addfile(info, io.BytesIO(data))

        add("libggml.so.0", link="libggml.so.0.9.4")  # the link comes before its target
        add("llama-server", server_program(tag, variant, help_text), mode=0o755)
        add("libggml.so.0.9.4", b"\x7fELF demo library\n")
        add("demo-server.py", DEMO_SERVER)
    return buf.getvalue()


def publish(mirror: Path, tag: str, published: str, variants: list[str], help_text: str) -> None:
    folder = mirror / REPO / tag
    folder.mkdir(parents=True)
    names = {
        "vulkan": f"llama-{tag}-bin-ubuntu-vulkan-x64.tar.gz",
        "cpu": f"llama-{tag}-bin-ubuntu-x64.tar.gz",
    }
    for variant in variants:
        (folder / names[variant]).write_bytes(tarball(tag, variant, help_text))
    (folder / ".release.json").write_text(json.dumps({"published_at": published}))


def gguf(path: Path, arch: str, layers: int, kv_heads: int, ctx: int) -> None:
    """A small but real GGUF v3 header (no tensors), enough for discovery and sizing."""

    def string(s: str) -> bytes:
        raw = s.encode()
        return struct.pack("<Q", len(raw)) + raw

    kvs: list[tuple[str, int, bytes]] = [
        ("general.architecture", 8, string(arch)),
        ("general.name", 8, string(path.stem)),
        (f"{arch}.block_count", 4, struct.pack("<I", layers)),
        (f"{arch}.context_length", 4, struct.pack("<I", ctx)),
        (f"{arch}.embedding_length", 4, struct.pack("<I", 4096)),
        (f"{arch}.attention.head_count", 4, struct.pack("<I", 32)),
        (f"{arch}.attention.head_count_kv", 4, struct.pack("<I", kv_heads)),
    ]
    body = b"".join(string(k) + struct.pack("<I", t) + v for k, t, v in kvs)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, len(kvs)) + body)


def show_change(before: str | None, after: str | None) -> None:
    """Print how the generated config changed: all of it when new, else a unified diff."""
    if after is None or before == after:
        print("(llama-swap.yaml unchanged)" if after is not None else "", flush=True)
        return
    if before is None:
        print("--- llama-swap.yaml (new) ---")
        print(after, end="", flush=True)
        return
    diff = difflib.unified_diff(
        [line for line in before.splitlines() if not line.startswith("# inputs:")],
        [line for line in after.splitlines() if not line.startswith("# inputs:")],
        "llama-swap.yaml (before)",
        "llama-swap.yaml (after)",
        n=1,
        lineterm="",
    )
    print("\n".join(diff), flush=True)


def say(text: str) -> None:
    print(f"\n\033[1m== {text}\033[0m" if sys.stdout.isatty() else f"\n== {text}", flush=True)


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="backendmgr-demo-") as tmp_name:
        tmp = Path(tmp_name)
        mirror_root = tmp / "mirror"
        publish(mirror_root, "b11100", "2026-09-20T00:00:00Z", ["vulkan", "cpu"], HELP_OLD)
        publish(mirror_root, "b11211", "2026-09-27T00:00:00Z", ["vulkan", "cpu"], HELP_NEW)
        gguf(tmp / "models" / "qwen3-8b-q4_k_m.gguf", "qwen3", 36, 8, 40960)
        gguf(tmp / "models" / "llama-3.2-3b-q8_0.gguf", "llama", 28, 8, 131072)
        config = tmp / "config" / "config.yaml"
        config.parent.mkdir()
        config.write_text(
            "# demo config: one models folder, a 16 GiB budget per model\n"
            f"models_dirs: [{json.dumps(str(tmp / 'models'))}]\n"
            "vram_budget_gb: 16\n"
        )
        mirror = subprocess.Popen(
            [
                sys.executable,
                str(ROOT / "scripts" / "mirror.py"),
                str(mirror_root),
                "--host",
                "127.0.0.1",
                "--port",
                "0",
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert mirror.stdout is not None
            first = mirror.stdout.readline()  # "serving … at http://127.0.0.1:PORT …"
            api = first.split(" at ")[1].split()[0]
            env = {
                **os.environ,
                "BACKENDMGR_CONFIG": str(config),
                "BACKENDMGR_HOME": str(tmp / "home"),
                "BACKENDMGR_GITHUB_API": api,
                "BACKENDMGR_GPU": "AMD Radeon RX 7900 XTX",
                "BACKENDMGR_VRAM_GB": "24",
            }
            env.pop("BACKENDMGR_OFFLINE", None)
            output = config.parent / "llama-swap.yaml"

            def step(title: str, *args: str) -> None:
                """One line saying what the step does and why, the command, its output, and
                what it changed in the llama-swap config (the whole file only the first time)."""
                say(title)
                print(f"$ backendmgr {' '.join(args)}", flush=True)
                before = output.read_text() if output.exists() else None
                done = subprocess.run(
                    [sys.executable, "-m", "backendmgr", *args],
                    env=env,
                    text=True,
                    capture_output=True,
                    check=False,
                )
                sys.stdout.write(done.stderr)  # progress first, then the result: as it happened
                sys.stdout.write(done.stdout)
                if done.returncode != 0:
                    raise SystemExit(f"demo step failed with exit status {done.returncode}")
                show_change(before, output.read_text() if output.exists() else None)

            step(
                "The catalog: what can be installed here, and the suggested variant",
                "catalog",
            )
            step(
                "Journey 1: install the newest llama.cpp build (b11211, vulkan for this AMD "
                "GPU); both models now run it",
                "install",
                "llama-server",
            )
            step(
                "Install an older build beside it: b11100 stays inactive, nothing moves",
                "install",
                "llama-server",
                "b11100",
            )
            step(
                "Journey 2: pin qwen3-8b to the older build; only that model changes, and "
                "b11100's --help does not list --jinja, so that flag is left out with a note",
                "pin",
                "qwen3-8b-q4_k_m",
                "llama-server@b11100-vulkan",
            )
            step(
                "Install the newest CPU build too (inactive)",
                "install",
                "llama-server",
                "b11211",
                "--variant",
                "cpu",
            )
            step(
                "Journey 3: activate the CPU build; llama-3.2-3b follows, the pinned qwen3-8b "
                "stays on b11100",
                "activate",
                "llama-server@b11211-cpu",
            )
            step("Every installed build, which one is active and who pins it", "list")
            step(
                "Prove every entry starts: verify runs each model's command on a free port, waits "
                "for /health, sends one chat request, and stops it",
                "verify",
            )
            step("Consistency check", "doctor")
        finally:
            mirror.terminate()
            mirror.wait(timeout=10)
    say("Done: the mirror is stopped and the temporary folders are gone.")
    say("The same from a web page (needs backendmgr[web]): serve a mirror folder, then the UI")
    print("  python scripts/mirror.py MIRROR_DIR --port 8765 &")
    print("  BACKENDMGR_GITHUB_API=http://127.0.0.1:8765 backendmgr serve --open")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
