"""Issue 31: installing a Python-packaged backend the way a real vLLM install goes, with stand-in
wheels built here: the interpreter from the package's own ``Requires-Python``, a torch index the
user points at a mirror (and that may be down), a ``--version`` slower than its bound (the venv
is kept and reused), a GPU variant on a host without that GPU, and the index's upload dates.
Offline: wheels from a folder (PIP_FIND_LINKS/PIP_NO_INDEX) or a loopback PEP 691 index."""

from __future__ import annotations

import http.server
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from backendmgr.mirror import POLL_S
from tests.support.cli import Cli, error_line, ok
from tests.support.wheels import make_wheel

RUNNING = ".".join(map(str, sys.version_info[:3]))
MACHINE_ENV = dict(os.environ)  # before the fixtures hide this machine's interpreters
UV = Path(sys.executable).parent / "uv"

TWO_VARIANTS = """\
id: toy
name: Toy server
kind: vllm
source: {type: pypi, package: toy-server}
exe: {default: bin/toy-server}
variants:
  - {id: cuda, label: CUDA, platforms: [linux-x64, linux-arm64]}
  - {id: cpu, label: CPU, platforms: [linux-x64, linux-arm64], torch_backend: cpu}
"""


@pytest.fixture
def wheels(tmp_path: Path, config_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A find-links folder the test fills, the two-variant toy manifest, uv, and no other
    interpreter than the running one unless a test puts one on PATH."""
    folder = tmp_path / "wheels"
    folder.mkdir()
    monkeypatch.setenv("PIP_FIND_LINKS", str(folder))
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("BACKENDMGR_UV", str(UV))
    monkeypatch.setenv("UV_PYTHON_DOWNLOADS", "never")  # never the network, even if asked
    monkeypatch.setenv("UV_PYTHON_INSTALL_DIR", str(tmp_path / "uv-pythons"))
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path / "no-pyenv"))
    bare = tmp_path / "bin"
    bare.mkdir()
    monkeypatch.setenv("PATH", f"{bare}{os.pathsep}/usr/bin{os.pathsep}/bin")
    manifests = config_path.parent / "manifests"
    manifests.mkdir(parents=True)
    (manifests / "toy.yaml").write_text(TWO_VARIANTS)
    return folder


def _built(tmp_path: Path) -> list[str]:
    """What the toy component's builds folder holds (staging folders included)."""
    folder = tmp_path / "home" / "builds" / "toy"
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


def _other_python() -> tuple[Path, str] | None:
    """A real interpreter of another minor version than the running one, and its version."""
    roots = [Path(MACHINE_ENV.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"]
    candidates = [p / "bin" / "python" for r in roots if r.is_dir() for p in sorted(r.iterdir())]
    path_var = MACHINE_ENV.get("PATH")
    for minor in range(10, 15):
        if found := shutil.which(f"python3.{minor}", path=path_var):
            candidates.append(Path(found))
    for path in candidates:
        try:
            said = subprocess.run(
                [str(path), "-c", "import sys; print('%d.%d.%d' % sys.version_info[:3])"],
                capture_output=True,
                text=True,
                timeout=20,
                check=True,
            ).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            continue
        major, minor = (int(x) for x in said.split(".")[:2])
        if (major, minor) > sys.version_info[:2] and minor >= 10:
            return path.resolve(), said
    return None


def test_requires_python_the_running_interpreter_satisfies_is_used(cli: Cli, wheels: Path) -> None:
    make_wheel(wheels, "1.0.0", requires_python=">=3.10")
    plan = json.loads(ok(cli("--json", "install", "toy", "--variant", "cpu", "--dry-run")).out)
    assert plan["requires_python"] == ">=3.10"
    assert (plan["python"], plan["interpreter"]) == (RUNNING, sys.executable)
    done = json.loads(ok(cli("--json", "install", "toy", "1.0.0", "--variant", "cpu")).out)
    assert done["python"] == RUNNING and done["requires_python"] == ">=3.10"


def test_requires_python_beyond_the_running_one_takes_an_installed_one_or_says_what_would_do(
    cli: Cli, wheels: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    beyond = f">={sys.version_info[0]}.{sys.version_info[1] + 1}"
    make_wheel(wheels, "1.0.0", requires_python=beyond)
    # nothing installed fits, downloads are off: one line with the versions and the setting
    line = error_line(cli("install", "toy", "1.0.0", "--variant", "cpu"))
    nxt = f"3.{sys.version_info[1] + 1}"
    assert f"toy-server 1.0.0 needs Python {beyond}" in line and nxt in line, line
    assert "BACKENDMGR_PYTHON=/path/to/python" in line
    assert "BACKENDMGR_OFFLINE forbids a download" in line
    assert _built(tmp_path) == []
    monkeypatch.delenv("BACKENDMGR_OFFLINE")  # now uv is asked, and cannot (downloads: never)
    line = error_line(cli("install", "toy", "1.0.0", "--variant", "cpu"))
    assert f"needs Python {beyond}" in line and "uv could not download one (uv venv" in line
    assert "BACKENDMGR_PYTHON=/path/to/python" in line
    assert _built(tmp_path) == []
    other = _other_python()
    if other is None:
        pytest.skip("no interpreter newer than the running one on this machine")
    path, version = other
    minor = ".".join(version.split(".")[:2])
    (tmp_path / "bin" / f"python{minor}").symlink_to(path)  # python3.X on PATH
    done = json.loads(ok(cli("--json", "install", "toy", "1.0.0", "--variant", "cpu")).out)
    assert done["python"] == version
    ran = subprocess.run([done["path"]], capture_output=True, text=True, check=True, timeout=60)
    assert ran.stdout.strip() == "toy-server 1.0.0"
    # BACKENDMGR_PYTHON always wins, even over the running interpreter
    make_wheel(wheels, "2.0.0", requires_python=">=3.8")
    monkeypatch.setenv("BACKENDMGR_PYTHON", str(path))
    second = json.loads(ok(cli("--json", "install", "toy", "2.0.0", "--variant", "cpu")).out)
    assert second["python"] == version


def test_a_version_slower_than_its_bound_keeps_the_venv_and_a_retry_reuses_it(
    cli: Cli, wheels: Path, tmp_path: Path, config_path: Path
) -> None:
    make_wheel(wheels, "1.0.0", sleep=30)
    config_path.write_text("venv_smoke_timeout: 2\n")
    started = time.monotonic()
    result = cli("install", "toy", "1.0.0", "--variant", "cpu")
    line = error_line(result)
    assert time.monotonic() - started < 25, "the bound, not the program's 30 s"
    assert "toy-server --version did not finish within 2 s" in line
    assert "verifying running toy-server --version (at most 2 s)…" in result.err  # said first
    assert "the venv is kept in" in line and "run the same install again" in line
    kept = tmp_path / "home" / "builds" / "toy" / "1.0.0-cpu.staging-venv"
    assert (kept / "pyvenv.cfg").is_file() and (kept / ".backendmgr-kept.json").is_file()
    assert json.loads(ok(cli("--json", "list")).out) == []
    doctor = ok(cli("doctor"))  # kept on purpose: a note, not a problem
    assert "a venv kept after its --version check timed out" in doctor.err + doctor.out
    marker = kept / "made-by-the-first-run"
    marker.write_text("")
    for wheel in wheels.iterdir():
        wheel.write_bytes(b"not a zip")  # a retry that fetched anything would fail now
    retry = cli("--json", "install", "toy", "1.0.0", "--variant", "cpu", "--no-smoke")
    done = json.loads(ok(retry).out)
    build = tmp_path / "home" / "builds" / "toy" / "1.0.0-cpu"
    assert done["id"] == "toy@1.0.0-cpu" and (build / "made-by-the-first-run").exists()
    assert not kept.exists() and not (build / ".backendmgr-kept.json").exists()


def test_a_crashed_installs_staging_folder_is_not_reused(
    cli: Cli, wheels: Path, tmp_path: Path
) -> None:
    make_wheel(wheels, "1.0.0")
    left = tmp_path / "home" / "builds" / "toy" / "1.0.0-cpu.staging-venv"
    left.mkdir(parents=True)
    (left / "pyvenv.cfg").write_text("home = /nowhere\n")  # no kept mark: a crash's leftover
    done = json.loads(ok(cli("--json", "install", "toy", "1.0.0", "--variant", "cpu")).out)
    assert done["packages"]["toy-server"] == "1.0.0" and not left.exists()


@pytest.fixture
def down_url() -> Iterator[str]:
    """A loopback address where nothing listens (bound, never listening: refused at once)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/whl/cpu"
    finally:
        sock.close()


@pytest.mark.parametrize("where", ["env", "config"])
def test_a_torch_index_that_is_down_is_one_line_naming_it_the_setting_and_the_way_out(
    cli: Cli,
    wheels: Path,
    tmp_path: Path,
    config_path: Path,
    down_url: str,
    where: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    make_wheel(wheels, "1.0.0")
    monkeypatch.delenv("BACKENDMGR_OFFLINE")
    monkeypatch.setenv("BACKENDMGR_TIMEOUT", "2")
    if where == "env":
        monkeypatch.setenv("BACKENDMGR_TORCH_INDEX_URL", down_url)
    else:
        config_path.write_text(f"torch_index_url: {down_url}\n")
    plan = json.loads(ok(cli("--json", "install", "toy", "--variant", "cpu", "--dry-run")).out)
    assert plan["pip_args"][-4:] == [
        "--extra-index-url",
        down_url,
        "--index-strategy",
        "unsafe-best-match",
    ]
    line = error_line(cli("install", "toy", "1.0.0", "--variant", "cpu"))
    assert f"cannot reach the PyTorch index {down_url}" in line, line
    setting = "BACKENDMGR_TORCH_INDEX_URL" if where == "env" else "the config key torch_index_url"
    assert f"(set by {setting})" in line
    assert "install the cuda variant (--variant cuda), which needs only the package index" in line
    assert _built(tmp_path) == []
    assert not config_path.exists() or "backends" not in config_path.read_text()


def test_a_torch_index_without_uv_or_a_mirror_is_refused_before_anything(
    cli: Cli, wheels: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_wheel(wheels, "1.0.0")
    monkeypatch.setenv("BACKENDMGR_UV", "none")
    line = error_line(cli("install", "toy", "1.0.0", "--variant", "cpu"))
    assert "--torch-backend" in line and "BACKENDMGR_TORCH_INDEX_URL" in line
    monkeypatch.setenv("BACKENDMGR_TORCH_INDEX_URL", "ftp://mirror/whl/cpu")
    line = error_line(cli("install", "toy", "1.0.0", "--variant", "cpu"), code=2)
    assert "BACKENDMGR_TORCH_INDEX_URL=ftp://mirror/whl/cpu is not an http(s) URL" in line
    monkeypatch.setenv("BACKENDMGR_PYTHON", "/nonexistent/python3")
    monkeypatch.setenv("BACKENDMGR_TORCH_INDEX_URL", "http://127.0.0.1:9/whl/cpu")
    line = error_line(cli("install", "toy", "1.0.0", "--variant", "cuda"), code=2)
    assert "BACKENDMGR_PYTHON=/nonexistent/python3 does not run" in line


def test_a_gpu_variant_on_a_host_without_that_gpu_warns_and_catalog_says_so(
    cli: Cli, wheels: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_wheel(wheels, "1.0.0", sleep=30)  # its --version is not run on this host: no wait
    catalog = {c["id"]: c for c in json.loads(ok(cli("--json", "catalog")).out)}
    variants = {v["id"]: v for v in catalog["toy"]["variants"]}
    assert (variants["cuda"]["runs_here"], variants["cpu"]["runs_here"]) == (False, True)
    assert variants["cuda"]["why_not"] == "no NVIDIA GPU on this host"
    assert catalog["toy"]["suggested"] == "cpu"
    assert "cuda(no NVIDIA GPU),cpu" in ok(cli("catalog")).out
    releases = json.loads(ok(cli("--json", "releases", "toy")).out)
    assert releases[0]["variants"] == ["cuda", "cpu"] and releases[0]["runs_here"] == ["cpu"]
    assert "cuda(no NVIDIA GPU),cpu" in ok(cli("releases", "toy")).out
    started = time.monotonic()
    text = ok(cli("install", "toy", "1.0.0", "--variant", "cuda"))
    assert time.monotonic() - started < 25
    warned = [w for w in text.err.splitlines() if w.startswith("warning:")]
    assert any("toy@1.0.0-cuda needs a GPU this host lacks" in w for w in warned), text.err
    again = json.loads(
        ok(cli("--json", "install", "toy", "1.0.0", "--variant", "cuda", "--reinstall")).out
    )
    assert any("no NVIDIA GPU on this host" in w for w in again["warnings"])
    monkeypatch.setenv("BACKENDMGR_GPU", "NVIDIA GeForce RTX 4090")
    catalog = {c["id"]: c for c in json.loads(ok(cli("--json", "catalog")).out)}
    assert all(v["runs_here"] for v in catalog["toy"]["variants"])


class _Index(http.server.BaseHTTPRequestHandler):
    """A PEP 691 project page for toy-server: two versions with upload times, one of them
    declaring its Requires-Python, and a yanked one."""

    page = json.dumps(
        {
            "meta": {"api-version": "1.1"},
            "name": "toy-server",
            "files": [
                {
                    "filename": "toy_server-2.0.0-py3-none-any.whl",
                    "url": "toy_server-2.0.0-py3-none-any.whl",
                    "hashes": {},
                    "requires-python": ">=3.10",
                    "upload-time": "2026-03-04T05:06:07.123456Z",
                },
                {
                    "filename": "toy_server-1.0.0-py3-none-any.whl",
                    "url": "toy_server-1.0.0-py3-none-any.whl",
                    "hashes": {},
                    "upload-time": "2025-01-02T03:04:05Z",
                },
                {
                    "filename": "toy_server-3.0.0-py3-none-any.whl",
                    "url": "toy_server-3.0.0-py3-none-any.whl",
                    "hashes": {},
                    "yanked": "broken",
                    "upload-time": "2026-05-01T00:00:00Z",
                },
            ],
        }
    ).encode()

    def do_GET(self) -> None:
        if self.path.rstrip("/") != "/simple/toy-server":
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/vnd.pypi.simple.v1+json")
        self.send_header("Content-Length", str(len(self.page)))
        self.end_headers()
        self.wfile.write(self.page)

    def log_message(self, *args: object) -> None:
        pass


def test_releases_show_the_index_upload_date_and_the_plan_its_requires_python(
    cli: Cli, wheels: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Index)
    thread = threading.Thread(target=server.serve_forever, args=(POLL_S,), daemon=True)
    thread.start()
    try:
        monkeypatch.delenv("BACKENDMGR_OFFLINE")
        monkeypatch.delenv("PIP_NO_INDEX")
        monkeypatch.delenv("PIP_FIND_LINKS")
        monkeypatch.setenv("PIP_INDEX_URL", f"http://127.0.0.1:{server.server_port}/simple")
        listed = json.loads(ok(cli("--json", "releases", "toy")).out)
        assert [(r["tag"], r["published_at"]) for r in listed] == [
            ("2.0.0", "2026-03-04T05:06:07.123456+00:00"),
            ("1.0.0", "2025-01-02T03:04:05+00:00"),
        ]
        table = ok(cli("releases", "toy")).out
        assert "2026-03-04" in table and "2025-01-02" in table
        plan = json.loads(ok(cli("--json", "install", "toy", "--variant", "cpu", "--dry-run")).out)
        assert (plan["version"], plan["requires_python"]) == ("2.0.0", ">=3.10")
        assert plan["python"] == RUNNING
    finally:
        server.shutdown()
        server.server_close()


# vLLM's own serve parser, built as ``vllm serve`` builds it (its ServeSubcommand, which has
# kept its name while the modules around it moved), parsing the arguments backendmgr emits
# and validating them as ``vllm serve`` does before it starts; argparse exits 2 on a refusal.
_PARSE = """
import json, sys
try:
    from vllm.utils.argparse_utils import FlexibleArgumentParser
except ImportError:
    from vllm.utils import FlexibleArgumentParser
from vllm.entrypoints.cli.serve import ServeSubcommand
parser = FlexibleArgumentParser(prog="vllm")
serve = ServeSubcommand()
serve.subparser_init(parser.add_subparsers(dest="subparser"))
args = parser.parse_args(["serve", *json.loads(sys.argv[1])])
serve.validate(args)
print("parsed", args.model_tag)
"""


@pytest.mark.slow(reason="installs the real vLLM (gigabytes) from the configured package index")
@pytest.mark.skipif(
    os.environ.get("BACKENDMGR_REAL_VLLM") != "1", reason="set BACKENDMGR_REAL_VLLM=1"
)
def test_the_real_vllm_installs_and_its_own_parser_accepts_the_emitted_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.support.cli import run_backendmgr
    from tests.support.ggufs import write_hf

    for name in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS", "PIP_NO_INDEX"):
        if name in MACHINE_ENV:  # the configured index, as the user has it
            monkeypatch.setenv(name, MACHINE_ENV[name])
    monkeypatch.delenv("BACKENDMGR_OFFLINE")
    monkeypatch.setenv("BACKENDMGR_TIMEOUT", "120")
    models = tmp_path / "models"
    write_hf(
        models / "Qwen2.5-0.5B-Instruct",
        {
            "architectures": ["Qwen2ForCausalLM"],
            "model_type": "qwen2",
            "num_hidden_layers": 24,
            "num_attention_heads": 14,
            "num_key_value_heads": 2,
            "hidden_size": 896,
            "max_position_embeddings": 32768,
            "torch_dtype": "bfloat16",
        },
        weights=1 << 20,
    )
    config = Path(os.environ["BACKENDMGR_CONFIG"])
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(f"models_dirs: [{models}]\n")
    done = run_backendmgr("--json", "install", "vllm", "--variant", "cuda", timeout=3600)
    assert done.returncode == 0, done.stderr
    installed = json.loads(done.stdout)
    assert installed["packages"]["vllm"] == installed["version"]
    models_listed = json.loads(run_backendmgr("--json", "models").stdout)
    model_id = next(m["id"] for m in models_listed if m["backend"])
    argv = json.loads(run_backendmgr("--json", "cmd", "--", model_id).stdout)["argv"]
    serve = argv.index("serve")
    args = [a.replace("${PORT}", "8000") for a in argv[serve + 1 :]]
    python = Path(installed["path"]).parent / "python"
    # building vLLM's parser infers the device; a GPU-less box (the fixtures say "none") can
    # still build it as vLLM's CPU platform, which takes the same serve flags
    env = {**os.environ, "VLLM_TARGET_DEVICE": os.environ.get("VLLM_TARGET_DEVICE", "cpu")}
    parsed = subprocess.run(
        [str(python), "-c", _PARSE, json.dumps(args)],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
        env=env,
    )
    assert parsed.returncode == 0, parsed.stderr[-4000:]
    assert f"parsed {models / 'Qwen2.5-0.5B-Instruct'}" in parsed.stdout


def test_uvs_failed_fetch_from_the_pytorch_index_is_said_as_the_one_line(tmp_path: Path) -> None:
    """Without a mirror, uv's ``--torch-backend`` goes to the PyTorch index itself; its
    "Failed to fetch" (issue 31, step 2) becomes the same line a down mirror gets."""
    from backendmgr.catalog.manifest import parse_manifest
    from backendmgr.errors import InstallFailed
    from backendmgr.install.venv_job import TorchIndex, VenvPlan, _torch_failure

    manifest = parse_manifest(
        {
            "id": "vllm",
            "kind": "vllm",
            "source": {"type": "pypi", "package": "vllm"},
            "exe": {"default": "bin/vllm"},
            "variants": [{"id": "cuda"}, {"id": "cpu", "torch_backend": "cpu"}],
        },
        "a test",
    )
    plan = VenvPlan(
        manifest, "0.33.0", "cpu", tmp_path, "uv", (), torch=TorchIndex("cpu"), index_only="cuda"
    )
    said = InstallFailed(
        "uv pip install failed with exit status 2: \u00d7 Failed to fetch: "
        "`https://torch.invalid/whl/cpu/triton/` | ╰─▶ error sending request"
    )
    line = str(_torch_failure(plan, said))
    assert line.startswith("cannot reach the PyTorch index https://torch.invalid/whl/cpu ")
    assert "BACKENDMGR_TORCH_INDEX_URL" in line and "--variant cuda" in line
    other = InstallFailed("uv pip install failed with exit status 1: no solution for vllm")
    assert _torch_failure(plan, other) is other


def test_the_index_pips_config_files_set_is_passed_to_uv(
    cli: Cli, wheels: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_wheel(wheels, "1.0.0")
    conf = tmp_path / "pip.conf"
    conf.write_text("[global]\nindex-url = http://127.0.0.1:9/company/simple\n")
    monkeypatch.setenv("PIP_CONFIG_FILE", str(conf))
    plan = json.loads(ok(cli("--json", "install", "toy", "--variant", "cuda", "--dry-run")).out)
    assert plan["pip_args"][:2] == ["--index-url", "http://127.0.0.1:9/company/simple"]


class _Static(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


def _pep503(root: Path, project: str, wheels: list[Path], wants: str | None = None) -> None:
    """A static PEP 503 project page (as many mirrors serve) linking to ``wheels``."""
    page = root / project
    page.mkdir(parents=True)
    attr = f' data-requires-python="{wants.replace(">", "&gt;")}"' if wants else ""
    links = "".join(f'<a href="{w.name}"{attr}>{w.name}</a>\n' for w in wheels)
    for wheel in wheels:
        shutil.copy(wheel, page / wheel.name)
    (page / "index.html").write_text(f"<!DOCTYPE html><html><body>\n{links}</body></html>\n")


def test_a_torch_mirror_that_answers_gives_torch_and_an_html_index_is_read(
    cli: Cli, wheels: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cpu variant through a real uv against two loopback indexes: the package index (PEP
    503 HTML, with ``data-requires-python``) holds the package and a plain torch, the torch
    mirror a ``+cpu`` torch, which wins."""
    from tests.support.wheels import make_plain_wheel

    built = tmp_path / "built"
    toy = make_wheel(built, "1.0.0", requires=("torch",), requires_python=">=3.8")
    plain = make_plain_wheel(built, "torch", "2.0.0")
    cpu = make_plain_wheel(built / "cpu", "torch", "2.0.0+cpu")
    site = tmp_path / "site"
    _pep503(site / "simple", "toy-server", [toy], wants=">=3.8")
    _pep503(site / "simple", "torch", [plain])
    _pep503(site / "whl" / "cpu", "torch", [cpu])
    handler = lambda *a: _Static(*a, directory=str(site))  # noqa: E731
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, args=(POLL_S,), daemon=True).start()
    try:
        base = f"http://127.0.0.1:{server.server_port}"
        for name in ("BACKENDMGR_OFFLINE", "PIP_NO_INDEX", "PIP_FIND_LINKS"):
            monkeypatch.delenv(name)
        monkeypatch.setenv("PIP_INDEX_URL", f"{base}/simple")
        monkeypatch.setenv("BACKENDMGR_TORCH_INDEX_URL", f"{base}/whl/cpu")
        monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
        plan = json.loads(ok(cli("--json", "install", "toy", "--variant", "cpu", "--dry-run")).out)
        assert (plan["version"], plan["requires_python"]) == ("1.0.0", ">=3.8")
        done = json.loads(ok(cli("--json", "install", "toy", "--variant", "cpu")).out)
        assert done["packages"]["torch"] == "2.0.0+cpu"
        assert done["packages"]["toy-server"] == "1.0.0"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize(
    ("said", "kept"),
    [
        (">=3.10", ">=3.10"),
        (" >=3.11, <3.15 ", "<3.15,>=3.11"),
        (">=3.10\nerror: injected", None),
        ("x" * 1000, None),
        ("", None),
        (3.1, None),
    ],
)
def test_a_requires_python_from_the_index_is_kept_only_when_it_is_one(
    said: object, kept: str | None
) -> None:
    """What an index says goes into messages: only a valid specifier survives, normalised."""
    from backendmgr.sources.pypi import _requires_python

    assert _requires_python(said) == kept
