"""Builders for real archives and a release mirror that the installer tests download from."""

from __future__ import annotations

import io
import json
import os
import stat
import struct
import tarfile
import zipfile
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

B11211_ASSETS = [
    "llama-b11211-bin-ubuntu-x64.tar.gz",
    "llama-b11211-bin-ubuntu-arm64.tar.gz",
    "llama-b11211-bin-ubuntu-vulkan-x64.tar.gz",
    "llama-b11211-bin-ubuntu-vulkan-arm64.tar.gz",
    "llama-b11211-bin-ubuntu-cuda-12.8-x64.tar.gz",
    "llama-b11211-bin-ubuntu-cuda-13.4-x64.tar.gz",
    "llama-b11211-bin-ubuntu-cuda-13.4-arm64.tar.gz",
    "llama-b11211-bin-ubuntu-rocm-10.0-x64.tar.gz",
    "llama-b11211-bin-ubuntu-sycl-fp16-x64.tar.gz",
    "llama-b11211-bin-ubuntu-openvino-2026.4-x64.tar.gz",
    "llama-b11211-bin-macos-arm64.tar.gz",
    "llama-b11211-bin-macos-x64.tar.gz",
    "llama-b11211-bin-win-cpu-x64.zip",
    "llama-b11211-bin-win-cuda-12.4-x64.zip",
    "llama-b11211-bin-win-cuda-13.4-x64.zip",
    "llama-b11211-bin-win-vulkan-x64.zip",
    "llama-b11211-bin-win-rocm-10.0-x64.zip",
    "llama-b11211-bin-win-sycl-x64.zip",
    "cudart-llama-bin-win-cuda-12.4-x64.zip",
    "cudart-llama-bin-win-cuda-13.4-x64.zip",
]

OLD_ASSETS = [
    "llama-b5000-bin-ubuntu-x64.zip",
    "llama-b5000-bin-ubuntu-vulkan-x64.zip",
    "llama-b5000-bin-win-cpu-x64.zip",
    "llama-b5000-bin-win-hip-radeon-x64.zip",
    "llama-b5000-bin-win-vulkan-x64.zip",
    "llama-b5000-bin-win-cuda-12.4-x64.zip",
    "cudart-llama-bin-win-cuda-12.4-x64.zip",
    "llama-b5000-bin-macos-arm64.zip",
]


def server_script(
    tag: str,
    *,
    needs_lib: bool = True,
    fail: bool = False,
    help_text: str | None = None,
    devices: str | None = None,
) -> bytes:
    """A stand-in llama-server: prints its version, and fails like the real one when the
    library it links against is missing. With ``help_text`` it answers ``--help`` with it,
    with ``devices`` it answers ``--list-devices`` (both as llama-server does, on stdout)."""
    lines = ["#!/bin/sh", 'here=$(dirname "$0")']
    for flag, text in (("--help", help_text), ("--list-devices", devices)):
        if text is not None:
            assert "\nEND_OF_TEXT\n" not in f"\n{text}\n"
            lines.append(f'if [ "$1" = "{flag}" ]; then cat <<\'END_OF_TEXT\'\n{text}\nEND_OF_TEXT')
            lines.append("exit 0; fi")
    if needs_lib:
        lines.append(
            '[ -e "$here/libggml.so.0" ] || { echo "error while loading shared libraries: '
            'libggml.so.0: cannot open shared object file" >&2; exit 127; }'
        )
    if fail:
        lines.append('echo "Illegal instruction (core dumped)" >&2; exit 132')
    lines.append(f'echo "version: {tag.lstrip("b")} ({tag})"')
    return ("\n".join(lines) + "\n").encode()


@dataclass
class Entry:
    name: str
    data: bytes = b""
    kind: str = "file"  # file, dir, symlink, hardlink, chardev, fifo
    target: str = ""
    mode: int = 0o644


def llama_entries(
    tag: str,
    *,
    top: str = "build/bin",
    fail: bool = False,
    help_text: str | None = None,
    devices: str | None = None,
) -> list[Entry]:
    """What llama.cpp's Linux tarball holds: links listed before the library they point to."""
    script = server_script(tag, fail=fail, help_text=help_text, devices=devices)
    lib = "libggml.so.0.9.4"
    return [
        Entry(f"{top}/", kind="dir", mode=0o755),
        Entry(f"{top}/libggml.so", kind="symlink", target="libggml.so.0"),
        Entry(f"{top}/libggml.so.0", kind="symlink", target=lib),
        Entry(f"{top}/llama-server", script, mode=0o755),
        Entry(f"{top}/{lib}", b"\x7fELF fake library " * 64, mode=0o644),
        Entry(f"{top}/LICENSE", b"MIT\n"),
    ]


def make_tar(entries: Iterable[Entry], compression: str = "gz") -> bytes:
    buf = io.BytesIO()
    mode = {"gz": "w:gz", "xz": "w:xz", "": "w"}[compression]
    with tarfile.open(fileobj=buf, mode=mode) as tf:  # type: ignore[call-overload]
        for e in entries:
            info = tarfile.TarInfo(e.name)
            info.mode = e.mode
            info.mtime = 1_700_000_000
            if e.kind == "dir":
                info.type = tarfile.DIRTYPE
                tf.addfile(info)
            elif e.kind == "symlink":
                info.type, info.linkname = tarfile.SYMTYPE, e.target
                tf.addfile(info)
            elif e.kind == "hardlink":
                info.type, info.linkname = tarfile.LNKTYPE, e.target
                tf.addfile(info)
            elif e.kind == "chardev":
                info.type, info.devmajor, info.devminor = tarfile.CHRTYPE, 1, 3
                tf.addfile(info)
            elif e.kind == "fifo":
                info.type = tarfile.FIFOTYPE
                tf.addfile(info)
            else:
                info.size = len(e.data)
                tf.addfile(info, io.BytesIO(e.data))
    return buf.getvalue()


def make_tar_zst(entries: Iterable[Entry]) -> bytes:
    import zstandard

    return zstandard.ZstdCompressor().compress(make_tar(entries, ""))


def make_zip(entries: Iterable[Entry]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for e in entries:
            info = zipfile.ZipInfo(e.name, date_time=(2026, 9, 27, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            if e.kind == "symlink":
                info.external_attr = (stat.S_IFLNK | 0o777) << 16
                zf.writestr(info, e.target)
            elif e.kind == "dir":
                info.external_attr = (stat.S_IFDIR | 0o755) << 16
                zf.writestr(info, b"")
            else:
                info.external_attr = (stat.S_IFREG | e.mode) << 16
                zf.writestr(info, e.data)
    return buf.getvalue()


def publish(
    root: Path,
    repo: str,
    tag: str,
    assets: dict[str, bytes],
    *,
    published_at: str | None = None,
    prerelease: bool = False,
) -> Path:
    """Lay out one release the way the mirror serves it."""
    folder = root / repo / tag
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in assets.items():
        (folder / name).write_bytes(data)
    meta = {"prerelease": prerelease}
    if published_at:
        meta["published_at"] = published_at
    (folder / ".release.json").write_text(json.dumps(meta))
    return folder


def publish_llama(
    root: Path,
    tag: str,
    variants: Iterable[str] = ("vulkan",),
    *,
    published_at: str | None = None,
    fail: bool = False,
    help_text: str | None = None,
    devices: str | None = None,
) -> dict[str, bytes]:
    """Release ``tag`` of llama.cpp with Linux x64 tarballs for the given variants (``help_text``
    and ``devices``: what its ``--help`` and ``--list-devices`` print)."""
    names = {
        "cpu": f"llama-{tag}-bin-ubuntu-x64.tar.gz",
        "vulkan": f"llama-{tag}-bin-ubuntu-vulkan-x64.tar.gz",
        "rocm": f"llama-{tag}-bin-ubuntu-rocm-10.0-x64.tar.gz",
        "cuda": f"llama-{tag}-bin-ubuntu-cuda-13.4-x64.tar.gz",
    }
    entries = llama_entries(tag, fail=fail, help_text=help_text, devices=devices)
    assets = {names[v]: make_tar(entries) for v in variants}
    publish(root, "ggml-org/llama.cpp", tag, assets, published_at=published_at)
    return assets


def tree(root: Path) -> list[str]:
    """Every path below ``root`` (links shown with their targets) for before/after checks."""
    out = []
    for folder, dirs, files in os.walk(root):
        for name in sorted(dirs + files):
            p = Path(folder) / name
            rel = p.relative_to(root).as_posix()
            out.append(f"{rel} -> {os.readlink(p)}" if p.is_symlink() else rel)
    return sorted(out)


def user_setup(tmp_path: Path, config_path: Path) -> tuple[Path, Path]:
    """A user's config as the API tests start from: a commented file with one hand-made llama
    row (a stand-in that prints a version) and a models folder holding one real GGUF header.
    Returns (models folder, the row's executable)."""
    from tests.ggufs import write_gguf

    models = tmp_path / "models"
    write_gguf(models / "qwen3-8b-q4_k_m.gguf", "qwen3", layers=36, ctx=40960)
    manual = tmp_path / "opt" / "llama-server"
    manual.parent.mkdir(parents=True)
    manual.write_text("#!/bin/sh\necho 'version: 1 (b1)'\n")
    manual.chmod(0o755)
    config_path.parent.mkdir(parents=True, exist_ok=True)
    config_path.write_text(
        "# my setup\n"
        f"models_dirs: [{models}]\n"
        "backends:\n"
        "  - id: llama-src   # built from source\n"
        "    kind: llama\n"
        f"    path: {manual}\n"
    )
    return models, manual


# A llama-server stand-in that serves, for ``verify`` and the page's Verify button: answers
# --help and --version as the capability probe and smoke check ask, then /health, chat,
# embeddings and rerank on the --port it is given. Its own arguments (so a model's extra_args)
# can make it crash at start (--fake-mode crash), never become healthy (never), answer 500,
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


def empty_files_tar_gz(count: int, top: str = "tool") -> bytes:
    """A ``.tar.gz`` of ``count`` empty files, its ustar headers stamped from one template
    (tarfile's writer takes seconds for 100 000 entries)."""
    info = tarfile.TarInfo("x")
    info.mtime = 1_700_000_000
    template = bytearray(info.tobuf(tarfile.USTAR_FORMAT))
    template[0:100] = bytes(100)
    template[148:156] = b" " * 8  # the checksum is summed over spaces in its own field
    base = sum(template)
    headers = []
    for i in range(count):
        name = f"{top}/e{i}".encode()
        header = bytearray(template)
        header[: len(name)] = name
        header[148:155] = b"%06o\0" % (base + sum(name))
        headers.append(bytes(header))
    from backendmgr.install.inflate import fast_zlib  # ISA-L compresses them in a blink

    return bytes(fast_zlib.compress(b"".join(headers) + bytes(1024), 1, wbits=31))


def zeros_bomb_tar_gz(members: int, size: int, top: str = "tool") -> bytes:
    """One gzip stream of a tar whose ``members`` files each hold ``size`` zeros (a multiple
    of 1 MiB): a split bomb, compressed once per MiB and repeated, since deflate after a full
    flush starts afresh (compressing gigabytes of zeros takes seconds)."""
    from backendmgr.install.inflate import fast_zlib

    block = bytes(1 << 20)
    deflate = zlib.compressobj(9, zlib.DEFLATED, -15)
    deflate.compress(block)
    deflate.flush(zlib.Z_FULL_FLUSH)
    piece = deflate.compress(block) + deflate.flush(zlib.Z_FULL_FLUSH)
    out = [b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"]  # gzip header: no name, no mtime
    crc = 0
    for i in range(members):
        info = tarfile.TarInfo(f"{top}/zeros{i}.bin")
        info.size, info.mtime = size, 1_700_000_000
        header = info.tobuf(tarfile.USTAR_FORMAT)
        out.append(deflate.compress(header) + deflate.flush(zlib.Z_FULL_FLUSH))
        out.append(piece * (size >> 20))
        crc = fast_zlib.crc32(header, crc)
        for _ in range(size >> 20):
            crc = fast_zlib.crc32(block, crc)
    end = bytes(1024)
    out.append(deflate.compress(end) + deflate.flush())
    crc = fast_zlib.crc32(end, crc)
    total = members * (512 + size) + len(end)
    out.append(struct.pack("<II", crc, total & 0xFFFFFFFF))
    return b"".join(out)
