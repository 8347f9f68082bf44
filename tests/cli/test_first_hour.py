"""The first hour of a new user (issue 20): the places that misled or stopped one, each through
the real CLI (in this process, or as a child process where the console entry point, a shell
or a server matters)."""

from __future__ import annotations

import json
import os
import re
import select
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from filelock import FileLock

from backendmgr.mirror import MirrorServer
from tests.support import Entry, llama_entries, make_tar, publish, publish_llama
from tests.support.cli import CliResult

Cli = Callable[..., CliResult]


def usage_error(result: CliResult) -> str:
    """The one ``error:`` line of a usage error (exit status 2)."""
    assert result.code == 2, result
    assert "Traceback" not in result.err, result.err
    errors = [line for line in result.err.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, result.err
    return errors[0]


# --- 11: usage errors ------------------------------------------------------------------------


def test_a_mistyped_option_names_the_option_and_the_commands_help(cli: Cli) -> None:
    line = usage_error(cli("install", "llama-server", "--varient", "cuda"))
    assert "--varient" in line and "did you mean --variant?" in line
    assert "see 'backendmgr install --help'" in line
    line = usage_error(cli("backends", "add", "x", "--kind", "llama", "--path", "/bin/sh", "--nme"))
    assert "did you mean --name?" in line and "'backendmgr backends add --help'" in line
    assert "did you mean --json?" in usage_error(cli("list", "--jsn"))


def test_a_commands_option_typed_before_it_says_where_it_goes(cli: Cli) -> None:
    """Not "did you mean --no-generate?" for --no-generate itself."""
    line = usage_error(cli("--no-generate", "set", "m1", "ctx=5"))
    assert "--no-generate is an option of 'backendmgr set': put it after 'set'" in line, line
    line = usage_error(cli("--reinstall", "install", "llama-server"))
    assert "put it after 'install'" in line and "did you mean" not in line, line
    line = usage_error(cli("--force", "generate"))
    assert "--force is an option of 'backendmgr generate'" in line, line


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("backends", "add", "x", "--kind", "lama", "--path", "/bin/sh"), "did you mean llama"),
        (("install", "llama-server", "--platform", "windows-x64"), "use it with --dry-run"),
    ],
)
def test_usage_errors_exit_2(
    cli: Cli, config_path: Path, args: tuple[str, ...], needle: str
) -> None:
    line = usage_error(cli(*args))
    assert needle in line
    assert not config_path.exists()  # nothing was written


def test_completion_has_no_json_form(cli: Cli) -> None:
    for args in (("completion", "--json", "bash"), ("--json", "completion", "zsh")):
        result = cli(*args)
        assert "no JSON form" in usage_error(result)
        assert json.loads(result.out) == {"error": result.err[7:].strip(), "exit": 2}
    assert cli("completion", "bash").out.startswith("# bash completion for backendmgr")


# --- 11: progress lines and the summary ------------------------------------------------------


def test_waiting_for_another_install_reads_as_a_sentence(
    mirror: MirrorServer, mirror_root: Path, tmp_path: Path
) -> None:
    publish_llama(mirror_root, "b100", ["vulkan"])
    locks = tmp_path / "home" / "locks"
    locks.mkdir(parents=True)
    held = locks / "llama-server@b100-vulkan.lock"
    lines: list[str] = []
    with FileLock(held):  # as another backendmgr installing the same build would
        Path(f"{held}.pid").write_text(f"{os.getpid()}\n")
        child = subprocess.Popen(
            [sys.executable, "-m", "backendmgr", "install", "llama-server", "b100"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert child.stderr is not None
        while not any("waiting" in line for line in lines):
            line = child.stderr.readline()
            assert line, lines  # the child ended without saying whom it waits for
            lines.append(line.rstrip("\n"))
    out, err = child.communicate(timeout=60)
    assert child.returncode == 0, (out, err)
    wait = (
        f"waiting for another backendmgr (pid {os.getpid()}) installing llama-server@b100-vulkan…"
    )
    assert lines == ["resolving llama-server b100 vulkan", wait]


def test_a_resumed_install_counts_only_this_runs_bytes_in_its_speed(
    cli: Cli, mirror: MirrorServer, mirror_root: Path
) -> None:
    name = "llama-b100-bin-ubuntu-vulkan-x64.tar.gz"
    blob = Entry("build/bin/blob.bin", os.urandom(3 << 20))  # random: the gzip stays 3 MiB
    data = make_tar([*llama_entries("b100"), blob])
    publish(mirror_root, "ggml-org/llama.cpp", "b100", {name: data})
    # the first run loses its connection 256 KiB before the end, and the server then goes away
    mirror.cut_every = len(data) - (256 << 10)
    downloads = [0]

    def gone_after_the_first(handler: object) -> bool:
        if not getattr(handler, "route", "").startswith("/download/"):
            return False
        downloads[0] += 1
        if downloads[0] == 1:
            return False
        handler.send_json(404, {"message": "Not Found"})  # type: ignore[attr-defined]
        return True

    mirror.hooks.append(gone_after_the_first)
    assert cli("install", "llama-server").code == 1
    mirror.hooks.clear()
    mirror.cut_every = None
    rate = 256 << 10
    mirror.throttle = rate  # the last 256 KiB take about a second
    result = cli("install", "llama-server")
    assert result.code == 0, result
    assert re.search(rf"resuming {re.escape(name)} at \S+ MiB", result.err), result.err
    summary = [line for line in result.err.splitlines() if line.startswith("llama-server@")]
    assert len(summary) == 1, result.err
    assert "of it resumed)" in summary[0]
    found = re.search(r"([\d.]+) (B|KiB|MiB)/s", summary[0])
    assert found, summary[0]
    speed = float(found[1]) * {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20}[found[2]]
    # the mirror sends its first 64 KiB piece at once, so the last 256 KiB can arrive in 0.75 s
    # (341 KiB/s); counting the resumed 2.8 MiB as well would read more than 3 MiB/s
    assert speed <= rate * 1.5, summary[0]


def test_sync_names_the_build_on_each_line_of_its_concurrent_installs(
    cli: Cli, mirror: MirrorServer, mirror_root: Path, tmp_path: Path
) -> None:
    publish_llama(mirror_root, "b100", ["vulkan", "cpu"])
    assert cli("install", "llama-server", "b100").code == 0
    assert cli("install", "llama-server", "b100", "--variant", "cpu").code == 0
    lock = tmp_path / "backendmgr.lock"
    assert cli("lock", "--output", str(lock)).code == 0
    # a second machine: its own home and config (a home that rewrites a llama-swap config
    # another home wrote has no record of it, so it cannot tell a hand edit: it keeps a .bak)
    machine = tmp_path / "other"
    other = ["--home", str(machine / "home"), "--config", str(machine / "config.yaml")]
    result = cli(*other, "sync", str(lock))
    assert result.code == 0, result
    ids = ("llama-server@b100-cpu", "llama-server@b100-vulkan")
    lines = result.err.splitlines()
    for build in ids:
        mine = [line for line in lines if line.startswith(f"{build}: ")]
        assert [line.split()[1] for line in mine][:2] == ["resolving", "downloading"], lines
    assert all(line.startswith(ids) for line in lines), lines


# --- 10: completion --------------------------------------------------------------------------


def test_completion_offers_keys_variants_and_options(cli: Cli, config_path: Path) -> None:
    user = config_path.parent / "manifests"
    user.mkdir(parents=True)
    (user / "mine.yaml").write_text(
        "id: my-server\nkind: llama\nvariants:\n  - id: fast\n  - {id: slow, label: Slow}\n"
    )

    def complete(*words: str) -> list[str]:
        result = cli("__complete", "--", *words)
        assert result.code == 0 and result.err == "", result
        return result.out.splitlines()

    from backendmgr.manager import SETTABLE_KEYS

    assert complete("set", "qwen3-8b", "") == [f"{key}=" for key in SETTABLE_KEYS]
    assert complete("set", "qwen3-8b", "")[:3] == ["ctx=", "vram_target_gb=", "vllm_gpu_util="]
    assert complete("set", "qwen3-8b", "ctx=32768", "vllm_g") == ["vllm_gpu_util="]
    assert complete("set", "qwen3-8b", "ctx=") == []  # the value is free text
    assert complete("unset", "qwen3-8b", "ctx", "ex") == ["extra_args"]
    assert complete("install", "llama-server", "--variant", "") == [
        "cpu",
        "cuda",
        "vulkan",
        "rocm",
        "metal",
        "sycl",
        "openvino",
    ]
    assert complete("install", "my-server", "--variant", "") == ["fast", "slow"]
    assert complete("releases", "my-server", "--variant=s") == ["--variant=slow"]
    assert complete("install", "my-server", "--variant", "=", "f") == ["fast"]  # bash's split
    options = complete("install", "llama-server", "")  # a version needs the network: options
    assert "--variant" in options and "--dry-run" in options and "--version" not in options
    assert complete("doctor", "") == [
        "--config",
        "--debug",
        "--fix",
        "--help",
        "--home",
        "--json",
        "--quiet",
    ]
    assert complete("install", "llama-server", "b100", "--dry-run", "--pl") == ["--platform"]
    assert complete("sync", "") == []  # a lock file's path: left to the shell


def test_completing_variants_loads_no_pydantic() -> None:
    from tests.support.startup import loaded_after

    out, loaded = loaded_after("__complete", "--", "install", "vllm", "--variant", "")
    assert out.split() == ["cuda", "cpu", "rocm"]
    assert "pydantic" not in loaded


# --- 3: the web extra's hint -----------------------------------------------------------------

WITHOUT_WEB = (
    "import sys; sys.modules['uvicorn'] = None; sys.modules['starlette'] = None\n"
    "from backendmgr.cli.main import main; sys.exit(main(['serve']))"
)


@pytest.mark.parametrize(
    ("direct_url", "hint"),
    [
        (None, "-m pip install 'backendmgr[web]'"),
        ({"url": "file:///src/my%20backendmgr", "dir_info": {"editable": True}}, "EDITABLE"),
        ({"url": "file:///src/bm", "dir_info": {}}, "cd /src/bm && PY -m pip install '.[web]'"),
    ],
)
def test_the_web_extras_hint_fits_how_backendmgr_was_installed(
    tmp_path: Path, direct_url: dict[str, object] | None, hint: str
) -> None:
    """What pip recorded for the install (``direct_url.json``) decides the hint; a record on
    PYTHONPATH stands for the installed one."""
    record = tmp_path / "site" / "backendmgr-1.0.dist-info"
    record.mkdir(parents=True)
    (record / "METADATA").write_text("Metadata-Version: 2.1\nName: backendmgr\nVersion: 1.0\n")
    if direct_url is not None:
        (record / "direct_url.json").write_text(json.dumps(direct_url))
    shown = subprocess.run(
        [sys.executable, "-c", WITHOUT_WEB],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "PYTHONPATH": str(record.parent)},
    )
    assert shown.returncode == 1
    line = shown.stderr.strip()
    assert line.startswith("error: backendmgr serve needs the web extra"), shown.stderr
    py = sys.executable
    if hint == "EDITABLE":  # the folder named, quoted for a shell
        hint = f"cd '/src/my backendmgr' && {py} -m pip install -e '.[web]'"
    assert line.endswith(hint.replace("PY", py)), line


# --- 13: serve --json ------------------------------------------------------------------------


def test_serve_json_prints_where_it_listens_at_start() -> None:
    pytest.importorskip("uvicorn", reason="the web extra is not installed")
    import signal
    import urllib.request

    server = subprocess.Popen(
        [sys.executable, "-m", "backendmgr", "--json", "serve", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        said, _, _ = select.select([server.stdout], [], [], 30)
        assert said, "serve --json printed nothing in 30 s"
        started = json.loads(server.stdout.readline())
        assert started["pid"] == server.pid
        assert (started["host"], started["url"].split("/?")[0]) == (
            "127.0.0.1",
            f"http://127.0.0.1:{started['port']}",
        )
        assert "token=" in started["url"] and started["port"] > 0
        # the secret URL opens the page (it hands the browser a cookie and sends it on)
        browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor())
        with browser.open(started["url"], timeout=10) as page:
            assert page.status == 200
    finally:
        server.send_signal(signal.SIGTERM)
        out, err = server.communicate(timeout=30)
    assert out == ""  # one document: nothing more on stdout, also when it stops
    assert "Traceback" not in err


# --- 1: a release folder to install from -----------------------------------------------------


def test_mirror_explains_a_missing_folder(tmp_path: Path) -> None:
    from tests.support.paths import ROOT

    missing = tmp_path / "releases"
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "mirror.py"), str(missing)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2 and done.stdout == ""
    line = done.stderr.strip().splitlines()[-1]
    assert line.startswith(f"mirror.py: error: {missing} is not a folder of releases"), line
    assert f"scripts/demo --keep {missing}" in line and f"backendmgr fetch {missing}" in line
    assert not missing.exists()  # explained, not made up


# --- 2: scripts/test says what it will do ----------------------------------------------------


def test_scripts_test_says_what_it_installs_and_how_long_it_takes() -> None:
    from tests.support.paths import ROOT

    def plan(**env: str) -> str:
        done = subprocess.run(
            [str(ROOT / "scripts" / "test"), "--plan"],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            env={**os.environ, **env},
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    told = plan(BACKENDMGR_NO_BROWSER="1")
    assert "skips the browser test (BACKENDMGR_NO_BROWSER=1) and installs no Chromium" in told
    assert "apt-get" not in told
    assert "about 7 minutes on 2 quiet CPU cores" in told and "its own time and test count" in told
    assert ".venv" in told
    told = plan()
    root = os.geteuid() == 0
    if shutil.which("chromedriver"):
        assert "runs the browser test with the headless Chromium found here" in told
    elif root and shutil.which("apt-get"):
        assert "installs Debian's chromium and chromium-driver for the whole machine" in told
    else:
        assert "skips the browser test: no headless Chromium here" in told


def test_no_browser_skips_the_browser_test_with_its_reason() -> None:
    pytest.importorskip("selenium", reason="selenium is not installed")
    from tests.support.paths import ROOT

    browser_test = str(ROOT / "tests" / "web" / "test_browser.py")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", browser_test],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=ROOT,
        env={**os.environ, "BACKENDMGR_NO_BROWSER": "1"},
    )
    assert done.returncode == 0, done.stdout[-2000:]
    assert "BACKENDMGR_NO_BROWSER is set: no browser test" in done.stdout
    assert " passed" not in done.stdout


# --- 1 and 11: errors that name the way out ----------------------------------------------------


def test_an_unreachable_release_api_names_the_way_out(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    import socket

    import httpx

    from backendmgr.net import NetSettings, describe_network_failure

    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setenv("BACKENDMGR_GITHUB_API", f"http://127.0.0.1:{port}")
    monkeypatch.delenv("BACKENDMGR_OFFLINE", raising=False)
    result = cli("install", "llama-server")
    assert result.code == 1
    (line,) = [x for x in result.err.splitlines() if x.startswith("error: ")]
    assert f"cannot reach 127.0.0.1:{port}" in line and "BACKENDMGR_GITHUB_API" in line
    assert "scripts/mirror.py" in line
    # the default API (no request is sent here): every way to a build without GitHub
    said = describe_network_failure(
        httpx.ConnectError("Name or service not known"),
        "https://api.github.com/repos/ggml-org/llama.cpp/releases",
        NetSettings(),
    )
    for way in ("scripts/demo --keep DIR", "BACKENDMGR_GITHUB_API", "BACKENDMGR_OFFLINE=1"):
        assert way in said
    assert "\n" not in said
    # a download host that is not the API gets no advice about the API
    other = describe_network_failure(
        httpx.ConnectError("refused"), "https://example.invalid/a.tar.gz", NetSettings()
    )
    assert other == "cannot reach example.invalid: refused"


def test_a_mirror_without_the_repository_names_the_mirror(cli: Cli, mirror: MirrorServer) -> None:
    result = cli("releases", "llama-server")
    assert result.code == 1
    assert f"{mirror.base_url} has no repository ggml-org/llama.cpp (HTTP 404)" in result.err
    assert "GitHub" not in result.err


def test_a_mistyped_config_key_says_which_key_was_meant(cli: Cli, config_path: Path) -> None:
    config_path.parent.mkdir(parents=True, exist_ok=True)
    for text, expected in (
        ("modles_dirs: [/m]\n", 'unknown key "modles_dirs"; did you mean models_dirs?'),
        (
            "backends:\n  - {id: a, kind: llama, path: /x, defualt: true}\n",
            'unknown key "defualt" in backends[0]; did you mean default?',
        ),
        ("models:\n  m:\n    ctxx: 5\n", 'unknown key "ctxx" in models.m; did you mean ctx?'),
    ):
        config_path.write_text(text)
        result = cli("list")
        assert result.code == 1 and expected in result.err, result.err


def test_generate_output_into_a_missing_folder_is_refused(cli: Cli, tmp_path: Path) -> None:
    target = tmp_path / "no-such-dir" / "x.yaml"
    result = cli("generate", "--output", str(target))
    assert result.code == 2  # a folder typed wrong
    assert f"the folder {target.parent} does not exist" in result.err
    assert not target.parent.exists()
    assert cli("generate", "--output", str(tmp_path / "x.yaml")).code == 0  # a folder that is


def test_a_cached_release_list_older_than_an_installed_build_refreshes_itself(
    cli: Cli, mirror: MirrorServer, mirror_root: Path
) -> None:
    publish_llama(mirror_root, "b100", ["vulkan"], published_at="2026-01-01T00:00:00Z")
    listed = json.loads(cli("--json", "releases", "llama-server").out)
    assert [r["tag"] for r in listed] == ["b100"]  # now cached for ten minutes
    publish_llama(mirror_root, "b200", ["vulkan"], published_at="2026-02-01T00:00:00Z")
    done = cli("--json", "install", "llama-server", "b200", "--variant", "vulkan")
    assert done.code == 0, done.err
    listed = json.loads(cli("--json", "releases", "llama-server").out)
    assert [r["tag"] for r in listed] == ["b200", "b100"]
    assert listed[0]["installed"] == ["vulkan"]


def test_a_config_file_that_is_not_there_is_an_empty_config_however_it_is_named(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SPEC §2, decided once (issue 29): ``--config MISSING`` and ``BACKENDMGR_CONFIG=MISSING``
    both read defaults and create nothing; the first write creates the file."""
    missing = tmp_path / "fresh" / "config.yaml"
    reads = (("list",), ("backends",), ("models",), ("doctor",), ("config", "show"))
    by_option = [cli("--json", "--config", str(missing), *args) for args in reads]
    monkeypatch.setenv("BACKENDMGR_CONFIG", str(missing))
    by_env = [cli("--json", *args) for args in reads]
    for args, option, env in zip(reads, by_option, by_env, strict=True):
        assert option.code == env.code == 0, (args, option.err, env.err)
        assert option.out == env.out, args
    assert not missing.parent.exists()
    # a change names a new file: it creates it, by either name
    added = cli("--config", str(missing), "backends", "add", "x", "--kind", "custom")
    assert added.code == 2  # (--path is required) a usage error writes nothing
    added = cli("backends", "add", "x", "--kind", "custom", "--path", "/x", "--force")
    assert added.code == 0, added.err
    assert missing.is_file()


def test_a_mistyped_version_names_the_nearest_tags(
    cli: Cli, mirror: MirrorServer, mirror_root: Path
) -> None:
    publish_llama(mirror_root, "b11211", ["vulkan"])
    result = cli("install", "llama-server", "b11210", "--variant", "vulkan")
    assert result.code == 1
    assert "has no release b11210; did you mean b11211?" in result.err, result.err


def test_completion_offers_only_rows_the_command_takes(cli: Cli, config_path: Path) -> None:
    """``pin MODEL <TAB>`` never offers llama-swap's kindless row (pin refuses it), ``default
    <TAB>`` no build row nor a classless one, ``backends remove <TAB>`` only manual rows: the
    same rule each command applies (issue 33)."""
    config_path.parent.mkdir(parents=True, exist_ok=True)
    config_path.write_text(
        "backends:\n"
        "  - {id: llama-swap, kind: '', path: /bin/true, managed: true, component: llama-swap,"
        " version: v1, variant: any}\n"
        "  - {id: srv, kind: llama, path: /bin/true}\n"
        "  - {id: srv@b1-cpu, kind: llama, path: /bin/true, managed: true, build: true,"
        " component: srv, version: b1, variant: cpu}\n"
        "  - {id: mine, kind: custom, path: /bin/true}\n"
    )

    def complete(*words: str) -> list[str]:
        result = cli("__complete", "--", *words)
        assert result.code == 0 and result.err == "", result
        return result.out.splitlines()

    pinnable = complete("pin", "m", "")
    assert pinnable == ["srv", "srv@b1-cpu", "mine"]
    assert complete("default", "") == ["srv"]
    assert complete("backends", "remove", "") == ["srv", "mine"]
    for row in ("llama-swap",):  # what completion leaves out, the command refuses
        assert cli("pin", "m", row).code != 0
    for row in ("llama-swap", "srv@b1-cpu", "mine"):
        assert cli("default", row).code != 0
