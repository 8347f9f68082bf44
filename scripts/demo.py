#!/usr/bin/env python3
"""The offline demo behind ``scripts/demo``: three journeys against a local release mirror.

1. install the newest llama.cpp build, and an older one beside it (each build's --help is read
   at install: the older one lacks --jinja);
2. pin one model to the older build: its command loses --jinja, with a NOTE saying why;
3. activate another build: every model that is not pinned follows;
4. (with a llama-swap binary at hand: ``../shared/llama-swap/bin/llama-swap`` beside the
   checkout, or BACKENDMGR_DEMO_LLAMA_SWAP) install llama-swap from the mirror, run ``up`` in
   the background, send one chat request through the proxy, pin a model and watch llama-swap
   reload, and stop everything.
Then, measured rather than guessed (issue 22): ``verify --repair`` moves a new model off a build
that does not know its architecture, and ``tune`` finds the largest context within a budget.

Everything lives in a temporary folder; the mirror runs as ``scripts/mirror.py`` on 127.0.0.1
and is stopped at the end. ``--keep DIR`` builds the mirror's releases in DIR instead and leaves
them there: a release folder to install from where GitHub cannot be reached.
"""

from __future__ import annotations

import argparse
import difflib
import io
import json
import os
import shlex
import signal
import struct
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

ROOT = Path(__file__).resolve().parent.parent
REPO = "ggml-org/llama.cpp"
SWAP_REPO = "mostlygeek/llama-swap"
SWAP_TAG = "v250"


def llama_swap_binary() -> Path | None:
    """The llama-swap the demo publishes on its mirror: none ships with backendmgr."""
    named = os.environ.get("BACKENDMGR_DEMO_LLAMA_SWAP")
    path = Path(named) if named else ROOT.parent / "shared" / "llama-swap" / "bin" / "llama-swap"
    return path if path.is_file() and os.access(path, os.X_OK) else None


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
        # the interpreter on PATH, not this clone's: the kept builds run wherever they go
        f'exec "$here/demo-server.py" --demo-tag {tag} "$@"\n'  # DEMO_SERVER
    ).encode()


# What the stand-in runs when llama-swap (or `backendmgr verify`) starts it: an OpenAI-shaped
# server on --port that is healthy at once and answers every completion with "hello". Like the
# real one it holds memory in proportion to its context (1 KiB per token here), and a build
# older than b11200 does not know the olmo3 architecture, in llama.cpp's words.
DEMO_SERVER = b"""\
#!/usr/bin/env python3
import json, os, sys
from http.server import BaseHTTPRequestHandler, HTTPServer

def opt(name, default):
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default

model = opt("-m", "")
if int(opt("--demo-tag", "b0")[1:]) < 11200 and os.path.basename(model).startswith("olmo3"):
    print("llama_model_load: error loading model: error loading model architecture: "
          "unknown model architecture: 'olmo3'", file=sys.stderr)
    print("main: exiting due to model loading error", file=sys.stderr)
    sys.exit(1)
held = b"\\x01" * (int(opt("-c", "4096")) * 1024)

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
        add("demo-server.py", DEMO_SERVER, mode=0o755)
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


def publish_llama_swap(mirror: Path, binary: Path) -> None:
    """A release shaped like llama-swap's own: a tarball per platform and a checksums file."""
    import hashlib

    version = SWAP_TAG.removeprefix("v")
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=1) as tf:
        tf.add(binary, "llama-swap")
    name = f"llama-swap_{version}_linux_amd64.tar.gz"
    folder = mirror / SWAP_REPO / SWAP_TAG
    folder.mkdir(parents=True)
    (folder / name).write_bytes(buf.getvalue())
    digest = hashlib.sha256(buf.getvalue()).hexdigest()
    (folder / f"llama-swap_{version}_checksums.txt").write_text(f"{digest}  {name}\n")
    (folder / ".release.json").write_text(json.dumps({"published_at": "2026-08-22T00:00:00Z"}))


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


@dataclass
class World:
    """The demo's temporary world: its folder, the config, and the environment that points
    backendmgr at the loopback mirror, a fresh home and the demo's stated GPU."""

    tmp: Path
    config: Path
    env: dict[str, str]
    models: Path  # the models folder (in the --keep folder when one is given)
    llama_swap: bool = False  # a llama-swap release is on the mirror

    @property
    def output(self) -> Path:
        return self.config.parent / "llama-swap.yaml"


@contextmanager
def demo_world(keep: Path | None = None) -> Iterator[World]:
    """Build the mirror (two llama.cpp releases), two models and a config in a temporary folder,
    serve the mirror on 127.0.0.1, and on the way out stop it and remove everything but
    ``keep``, where the mirror's releases are built when it is given."""
    with tempfile.TemporaryDirectory(prefix="backendmgr-demo-") as tmp_name:
        tmp = Path(tmp_name)
        mirror_root = keep or tmp / "mirror"
        publish(mirror_root, "b11100", "2026-09-20T00:00:00Z", ["vulkan", "cpu"], HELP_OLD)
        publish(mirror_root, "b11211", "2026-09-27T00:00:00Z", ["vulkan", "cpu"], HELP_NEW)
        binary = llama_swap_binary()
        if binary is not None:
            publish_llama_swap(mirror_root, binary)
        models = keep / "models" if keep else tmp / "models"  # kept: the model files too
        gguf(models / "qwen3-8b-q4_k_m.gguf", "qwen3", 36, 8, 40960)
        gguf(models / "llama-3.2-3b-q8_0.gguf", "llama", 28, 8, 131072)
        config = tmp / "config" / "config.yaml"
        config.parent.mkdir()
        config.write_text(
            "# demo config: one models folder, a 16 GiB budget per model\n"
            f"models_dirs: [{json.dumps(str(models))}]\n"
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
            yield World(tmp, config, env, models, llama_swap=binary is not None)
        finally:
            mirror.terminate()
            mirror.wait(timeout=10)


def backendmgr(world: World, *args: str) -> subprocess.CompletedProcess[str]:
    """Run one backendmgr command in the demo's world, its output captured."""
    return subprocess.run(
        [sys.executable, "-m", "backendmgr", *args],
        env=world.env,
        text=True,
        capture_output=True,
        check=False,
    )


def journey(world: World) -> None:
    """The three journeys, each step with its output and what it changed in the config."""
    output = world.output

    def step(title: str, *args: str) -> None:
        """One line saying what the step does and why, the command, its output, and
        what it changed in the llama-swap config (the whole file only the first time)."""
        say(title)
        print(f"$ backendmgr {' '.join(args)}", flush=True)
        before = output.read_text() if output.exists() else None
        done = backendmgr(world, *args)
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
    new_model = "olmo3-7b-q4_k_m"
    gguf(world.models / f"{new_model}.gguf", "olmo3", 32, 8, 65536)
    step(
        "A new model arrives, pinned by habit to the older build",
        "pin",
        new_model,
        "llama-server@b11100-vulkan",
    )
    step(
        "Measured, not guessed: verify --repair finds b11100 does not know its architecture "
        "(the cause and its fix), tries the other builds newest first and pins the first "
        "that serves it",
        "verify",
        "--repair",
        new_model,
    )
    step(
        "tune bisects over the contexts the emitter can write for the largest that starts "
        "and fits a budget (here the stand-in's resident memory); generate then uses it",
        "tune",
        new_model,
        "--budget",
        "0.06",
    )
    step("Consistency check", "doctor")
    if world.llama_swap:
        proxy(world, step)
    else:
        say("llama-swap: skipped, no llama-swap binary to publish on the mirror")
        print(
            "set BACKENDMGR_DEMO_LLAMA_SWAP to a llama-swap executable to see the endpoint part",
            flush=True,
        )


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def proxy(world: World, step: Callable[..., None]) -> None:
    """Journey 4: from the config file to a running endpoint."""
    import time
    import urllib.request

    step(
        "Journey 4: install llama-swap itself from the mirror; it serves no model, so the "
        "config does not change",
        "install",
        "llama-swap",
    )
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    say(
        f"Run llama-swap on the generated config in the background: backendmgr up --listen "
        f"127.0.0.1:{port}"
    )
    log = (world.tmp / "up.log").open("w")
    up = subprocess.Popen(
        [sys.executable, "-m", "backendmgr", "up", "--listen", f"127.0.0.1:{port}"],
        env=world.env,
        stdout=log,
        stderr=subprocess.STDOUT,
        text=True,
    )

    def call(path: str, body: dict[str, object] | None = None) -> dict[str, object]:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(
            f"{url}{path}", data=data, headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=60) as answer:
            return dict(json.loads(answer.read()))

    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=1):
                    break
            except OSError:
                if up.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit("demo step failed: llama-swap did not start") from None
                time.sleep(0.1)
        served = [m["id"] for m in call("/v1/models")["data"]]  # type: ignore[index]
        print(f"llama-swap serves: {', '.join(served)}", flush=True)
        say("One chat request through the proxy: llama-swap starts the model's emitted cmd")
        answer = call(
            "/v1/chat/completions",
            {"model": "llama-3.2-3b-q8_0", "messages": [{"role": "user", "content": "hi"}]},
        )
        print(f"answer: {answer['choices'][0]['message']['content']}", flush=True)  # type: ignore[index]
        step("What runs now, from llama-swap's own API", "status")
        step(
            "Pin llama-3.2-3b to the older build while llama-swap runs: the command waits "
            "until llama-swap has reloaded the file",
            "pin",
            "llama-3.2-3b-q8_0",
            "llama-server@b11100-vulkan",
        )
        call(
            "/v1/chat/completions",
            {"model": "llama-3.2-3b-q8_0", "messages": [{"role": "user", "content": "hi"}]},
        )
        running = call("/running")["running"]
        cmd = str(running[0]["cmd"]).split()[0]  # type: ignore[index]
        print(f"the next start runs {cmd}", flush=True)
    finally:
        say("Stop llama-swap (Ctrl-C does the same): it and every model server it started")
        up.send_signal(signal.SIGINT)
        try:
            up.wait(timeout=60)
        except subprocess.TimeoutExpired:
            up.kill()
            up.wait()
        log.close()
    tail = (world.tmp / "up.log").read_text().strip().splitlines()
    print(tail[-1] if tail else f"backendmgr up exited with status {up.returncode}", flush=True)


UI_PORT = 8577
UI_HINT = (
    "See the same on a web page: scripts/demo --ui (serves this demo's mirror and a fresh home "
    f"at http://127.0.0.1:{UI_PORT} until Ctrl-C)"
)
KEEP_HINT = (
    "Keep these releases to install from without GitHub: scripts/demo --keep DIR (prints how "
    "to serve them)"
)
# What --ui installs before serving: the newest build (active) and an older one beside it, so the
# page has builds to activate and uninstall, while the CPU variant stays on the mirror for the
# page's own install control and its live progress bar.
UI_INSTALLS = (("install", "llama-server"), ("install", "llama-server", "b11100"))


class Stop:
    """SIGINT and SIGTERM while serving: remember them and pass one SIGTERM on to the server,
    which then stops its jobs and exits; the demo cleans up after it. Ctrl-C in a terminal
    reaches the server too, as SIGINT; uvicorn takes a later SIGTERM as the same request."""

    def __init__(self) -> None:
        self.requested = False
        self.server: subprocess.Popen[str] | None = None

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        self.requested = True
        if self.server is not None and self.server.poll() is None:
            self.server.send_signal(signal.SIGTERM)


def serve_ui(world: World, port: int, open_page: bool, stop: Stop) -> int:
    """Install two builds, then run ``backendmgr serve`` in the demo's world until stopped."""
    for args in UI_INSTALLS:
        if stop.requested:
            return 0
        done = backendmgr(world, *args)
        if done.returncode != 0:
            if stop.requested:
                return 0
            sys.stdout.write(done.stderr + done.stdout)
            print(f"error: demo step failed with exit status {done.returncode}", file=sys.stderr)
            return 1
        result = done.stdout.strip().splitlines()
        print(f"$ backendmgr {' '.join(args)}: {result[-1] if result else 'done'}", flush=True)
    if stop.requested:
        return 0
    command = [sys.executable, "-m", "backendmgr", "serve", "--port", str(port)]
    if open_page:
        command.append("--open")
    # Unbuffered, so the line with the address arrives as soon as the server has bound.
    server = subprocess.Popen(
        command, env={**world.env, "PYTHONUNBUFFERED": "1"}, stdout=subprocess.PIPE, text=True
    )
    stop.server = server
    if stop.requested:  # a signal between the installs and here
        server.send_signal(signal.SIGTERM)
    assert server.stdout is not None
    ready = server.stdout.readline()
    sys.stdout.write(ready)
    url = next((word for word in ready.split() if word.startswith("http://")), None)
    if url is not None:
        print(f"page: {url}", flush=True)
        print("Ctrl-C stops the server and the mirror and removes the demo folder", flush=True)
    for line in server.stdout:  # "stopped", once it has
        sys.stdout.write(line)
    code = server.wait()
    if stop.requested:
        return 0
    if url is None:
        print(f"error: backendmgr serve did not start (exit status {code})", file=sys.stderr)
    return code or (1 if url is None else 0)


MIRROR_PORT = 8765  # scripts/mirror.py's default


def kept(folder: Path) -> str:
    """What to run to install from the kept releases: serve them, point backendmgr at them."""
    mirror = shlex.quote(str(ROOT / "scripts" / "mirror.py"))
    api = f"http://127.0.0.1:{MIRROR_PORT}"
    return (
        f"The demo's releases are kept in {folder} (stand-in llama.cpp builds: they answer "
        'every chat with "hello"). To install from them, serve the folder and point '
        "backendmgr at it:\n"
        f"  {mirror} {shlex.quote(str(folder))}\n"
        f"  BACKENDMGR_GITHUB_API={api} backendmgr install llama-server\n"
        f"The demo's model files are kept in {folder / 'models'}; to use them:\n"
        f"  backendmgr models add-dir {shlex.quote(str(folder / 'models'))}"
    )


def keep_folder(text: str) -> Path:
    """``--keep``: a folder that is missing or empty (a demo never mixes into other files)."""
    folder = Path(text).expanduser().absolute()
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise argparse.ArgumentTypeError(f"{folder} is not an empty folder; name a new one")
    return folder


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="scripts/demo",
        description="The whole journey offline, against a release mirror on 127.0.0.1; "
        "nothing is left behind.",
    )
    parser.add_argument(
        "--ui",
        action="store_true",
        help="instead of the journey: install two builds, then serve the web page on this "
        "demo's mirror and a fresh home until Ctrl-C (needs the web extra)",
    )
    parser.add_argument(
        "--port", type=int, default=None, help=f"the page's port with --ui ({UI_PORT}; 0 picks one)"
    )
    parser.add_argument("--open", action="store_true", help="with --ui: open the page in a browser")
    parser.add_argument(
        "--keep",
        metavar="DIR",
        type=keep_folder,
        help="build the demo's release mirror in DIR (new or empty) and leave it there, to "
        "install from with scripts/mirror.py DIR and BACKENDMGR_GITHUB_API",
    )
    args = parser.parse_args(argv)
    if not args.ui and (args.port is not None or args.open):
        parser.error("--port and --open go with --ui")
    if args.port is not None and not 0 <= args.port <= 65535:
        parser.error(f"--port must be 0 to 65535, not {args.port}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if not args.ui:
        with demo_world(args.keep) as world:
            print(f"demo folder: {world.tmp} (removed at the end)", flush=True)
            journey(world)
        say("Done: the mirror is stopped and the temporary folders are gone.")
        print(kept(args.keep) if args.keep else KEEP_HINT, flush=True)
        print(UI_HINT, flush=True)
        return 0
    stop = Stop()
    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        with demo_world(args.keep) as world:
            print(f"demo folder: {world.tmp} (removed on Ctrl-C)", flush=True)
            code = serve_ui(world, UI_PORT if args.port is None else args.port, args.open, stop)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if code == 0:
        print("stopped; the mirror is stopped and the demo folder is removed", flush=True)
        if args.keep:
            print(kept(args.keep), flush=True)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
