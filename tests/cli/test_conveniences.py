"""update, prune, cache clean, which, config, completion, releases marks and uninstall of
several builds: the CLI's ``main()`` in this process (completion scripts run in real shells),
installing from the loopback mirror."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from filelock import FileLock

from backendmgr.mirror import MirrorServer
from tests.support import publish_llama
from tests.support.cli import completed, run_in_process
from tests.support.ggufs import write_gguf

SHELLS = ["bash", "zsh", "fish"]

Proc = subprocess.CompletedProcess[str]


def bm(*args: str) -> Proc:
    return completed(run_in_process(*args), *args)


def ok(result: Proc) -> Proc:
    assert result.returncode == 0, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    return result


def refused(result: Proc, needle: str, code: int = 1) -> str:
    assert result.returncode == code, (result.stdout, result.stderr)
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in result.stderr, result.stderr
    assert needle in errors[0], errors[0]
    return errors[0]


def builds() -> list[tuple[str, bool, list[str]]]:
    rows = json.loads(ok(bm("--json", "list")).stdout)
    return [(r["id"], r["activated"], r["pinned_by"]) for r in rows]


def rows() -> list[str]:
    return [r["id"] for r in json.loads(ok(bm("--json", "backends")).stdout)]


def models_dir(tmp_path: Path, config_path: Path, *names: str) -> Path:
    root = tmp_path / "models"
    for name in names:
        write_gguf(root / f"{name}.gguf", "qwen3", layers=4, ctx=4096)
    config_path.parent.mkdir(parents=True, exist_ok=True)
    config_path.write_text(json.dumps({"models_dirs": [str(root)]}))  # JSON is YAML
    return root


# --- update ----------------------------------------------------------------------------------


def test_update_installs_the_newest_in_the_activated_variant_and_keeps_pins(
    mirror: MirrorServer, mirror_root: Path
) -> None:
    publish_llama(mirror_root, "b100", ["vulkan", "rocm"], published_at="2026-09-01T00:00:00Z")
    ok(bm("install", "llama-server", "b100", "--variant", "rocm"))
    ok(bm("install", "llama-server", "b100", "--variant", "vulkan"))
    ok(bm("pin", "qwen3-8b", "llama-server@b100-vulkan"))
    publish_llama(mirror_root, "b200", ["vulkan", "rocm"], published_at="2026-09-20T00:00:00Z")

    dry = ok(bm("update", "--dry-run"))
    assert dry.stdout.strip() == (
        "llama-server: would install and activate llama-server@b200-rocm "
        "(now llama-server@b100-rocm)"
    )
    assert sorted(b[0] for b in builds()) == ["llama-server@b100-rocm", "llama-server@b100-vulkan"]

    done = json.loads(ok(bm("--json", "update", "llama-server")).stdout)
    assert done["updates"] == [
        {
            "component": "llama-server",
            "variant": "rocm",
            "from": "llama-server@b100-rocm",
            "to": "llama-server@b200-rocm",
            "action": "installed",
        }
    ]
    assert sorted(builds()) == [
        ("llama-server@b100-rocm", False, []),
        ("llama-server@b100-vulkan", False, ["qwen3-8b"]),
        ("llama-server@b200-rocm", True, []),
    ]
    again = ok(bm("update"))
    assert again.stdout.strip() == "llama-server: llama-server@b200-rocm is the newest rocm build"
    refused(bm("update", "vllm"), 'vllm is not installed; run "backendmgr install vllm"')
    refused(bm("update", "nosuch"), 'unknown component "nosuch"', code=2)


# --- prune and cache clean ---------------------------------------------------------------


def test_prune_keeps_activated_pinned_and_the_newest(
    mirror: MirrorServer, mirror_root: Path
) -> None:
    for n, tag in enumerate(("b100", "b200", "b300", "b400")):
        publish_llama(mirror_root, tag, published_at=f"2026-09-0{n + 1}T00:00:00Z")
        ok(bm("install", "llama-server", tag))
    ok(bm("activate", "llama-server@b200-vulkan"))
    ok(bm("pin", "qwen3-8b", "llama-server@b100-vulkan"))

    refused(bm("prune", "--keep", "-1"), "must be 0 or more", code=2)
    dry = json.loads(ok(bm("--json", "prune", "--dry-run")).stdout)
    assert dry["removed"] == ["llama-server@b300-vulkan"] and dry["freed_bytes"] > 0
    assert len(builds()) == 4

    pruned = ok(bm("prune", "llama-server")).stdout
    assert pruned.splitlines()[0] == "removed llama-server@b300-vulkan"
    assert "  updated " in pruned  # issue 33: what changed on disk follows
    assert [b[0] for b in builds()] == [
        "llama-server@b400-vulkan",
        "llama-server@b200-vulkan",
        "llama-server@b100-vulkan",
    ]
    assert "llama-server@b300-vulkan" not in rows()
    assert ok(bm("prune", "--keep", "0")).stdout.splitlines()[0] == (
        "removed llama-server@b400-vulkan"
    )
    assert ok(bm("prune", "--keep", "0")).stdout.strip() == "nothing to prune"
    assert builds() == [
        ("llama-server@b200-vulkan", True, []),
        ("llama-server@b100-vulkan", False, ["qwen3-8b"]),
    ]


def test_cache_clean_reports_what_it_freed_and_spares_a_running_download(
    mirror: MirrorServer, mirror_root: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    publish_llama(mirror_root, "b100")
    ok(bm("install", "llama-server"))
    listings = list((home / "cache" / "github").rglob("*.json"))
    assert listings
    part = home / "downloads" / "abc-llama.tar.gz.part"
    part.parent.mkdir(parents=True, exist_ok=True)
    part.write_bytes(b"x" * 3 * 1024 * 1024)
    leftover = home / "builds" / "llama-server" / "b9-cpu.staging-q1"
    leftover.mkdir()
    (leftover / "junk").write_bytes(b"y" * 1024)

    # an install holding its build lock may be writing the .part file: keep it
    with FileLock(home / "locks" / "llama-server@b9-cpu.lock"):
        busy = ok(bm("cache", "clean"))
    assert "an install is running; its partial downloads were kept" in busy.stderr
    assert "0 partial download(s)" in busy.stdout and part.exists()
    assert not any(p.exists() for p in listings)

    dry = ok(bm("cache", "clean", "--dry-run"))
    assert dry.stdout.startswith("would free 3.0 MiB: 0 release listing(s), 1 partial download(s)")
    assert part.exists()
    clean = json.loads(ok(bm("--json", "cache", "clean")).stdout)
    assert clean["freed_bytes"] == 3 * 1024 * 1024 + 1024  # the .part and the leftover
    assert clean["partial_downloads"] == [str(part)]
    assert not part.exists() and not leftover.exists()
    assert ok(bm("cache", "clean")).stdout.startswith("freed 0 B: 0 release listing(s)")
    assert [b[0] for b in builds()] == ["llama-server@b100-vulkan"]


# --- which, releases, config -------------------------------------------------------------


def test_which_names_the_executable_and_the_reason(
    mirror: MirrorServer, mirror_root: Path, tmp_path: Path, config_path: Path
) -> None:
    models_dir(tmp_path, config_path, "qwen3-8b", "other-model")
    publish_llama(mirror_root, "b100", published_at="2026-09-01T00:00:00Z")
    publish_llama(mirror_root, "b200", published_at="2026-09-02T00:00:00Z")
    ok(bm("install", "llama-server", "b100"))
    ok(bm("install", "llama-server", "b200"))
    ok(bm("pin", "qwen3-8b", "llama-server@b200-vulkan"))
    exe = tmp_path / "home" / "builds" / "llama-server"
    b100 = str(exe / "b100-vulkan" / "build" / "bin" / "llama-server")
    b200 = str(exe / "b200-vulkan" / "build" / "bin" / "llama-server")

    comp = ok(bm("which", "llama-server")).stdout.splitlines()
    assert comp[0] == b100
    assert "activated build llama-server@b100-vulkan" in comp[1]
    assert "default (★) for llm" in comp[1]
    build = json.loads(ok(bm("--json", "which", "llama-server@b200")).stdout)
    assert (build["type"], build["path"], build["exists"]) == ("build", b200, True)
    assert "only when pinned" in build["reason"] and "pinned by qwen3-8b" in build["reason"]
    pinned = json.loads(ok(bm("--json", "which", "qwen3-8b")).stdout)
    assert (pinned["type"], pinned["row"], pinned["path"]) == (
        "model",
        "llama-server@b200-vulkan",
        b200,
    )
    assert pinned["reason"] == 'pinned to "llama-server@b200-vulkan"'
    follows = json.loads(ok(bm("--json", "which", "other-model")).stdout)
    assert (follows["row"], follows["path"]) == ("llama-server", b100)
    refused(bm("which", "nosuch-model"), 'no model, component, build or row "nosuch-model"', code=2)
    refused(bm("which", "vllm"), 'vllm is not installed; run "backendmgr install vllm"')
    refused(bm("which", "llama-server@b999"), "llama-server@b999 is not installed", code=2)


def test_releases_marks_installed_and_activated(mirror: MirrorServer, mirror_root: Path) -> None:
    publish_llama(mirror_root, "b100", ["vulkan", "rocm"], published_at="2026-09-01T00:00:00Z")
    publish_llama(mirror_root, "b200", ["vulkan", "rocm"], published_at="2026-09-02T00:00:00Z")
    ok(bm("install", "llama-server", "b100"))
    ok(bm("install", "llama-server", "b100", "--variant", "rocm"))
    listed = json.loads(ok(bm("--json", "releases", "llama-server")).stdout)
    assert [(r["tag"], r["installed"], r["activated"]) for r in listed] == [
        ("b200", [], None),
        ("b100", ["rocm", "vulkan"], "vulkan"),
    ]
    text = ok(bm("releases", "llama-server")).stdout
    b100 = next(line for line in text.splitlines() if "b100" in line)
    assert "rocm,vulkan (activated)" in b100


def test_config_path_and_show(tmp_path: Path, config_path: Path) -> None:
    home = tmp_path / "elsewhere"
    path = ok(bm("--home", str(home), "config", "path")).stdout.splitlines()
    assert path == [
        f"config:    {config_path} (not created yet; defaults apply)",
        f"generated: {config_path.parent / 'llama-swap.yaml'}",
        f"home:      {home}",
    ]
    config_path.parent.mkdir(parents=True, exist_ok=True)
    config_path.write_text(json.dumps({"ttl": 30, "output": str(tmp_path / "out.yaml")}))
    shown = json.loads(ok(bm("--json", "config", "show")).stdout)
    assert shown["config_exists"] is True and shown["output"] == str(tmp_path / "out.yaml")
    assert shown["settings"]["ttl"] == 30
    assert shown["settings"]["health_check_timeout"] == 300  # a default, filled in
    text = ok(bm("config", "show")).stdout
    assert "ttl: 30\n" in text and "server_exe: llama-server\n" in text
    refused(bm("config", "nope"), 'unknown command "nope"; choose from path, show', code=2)


# --- uninstall -------------------------------------------------------------------------------


def test_uninstall_several_is_all_or_nothing(mirror: MirrorServer, mirror_root: Path) -> None:
    for n, tag in enumerate(("b100", "b200", "b300")):
        publish_llama(mirror_root, tag, published_at=f"2026-09-0{n + 1}T00:00:00Z")
        ok(bm("install", "llama-server", tag))
    before = builds()
    refused(
        bm("uninstall", "llama-server@b200", "llama-server@b100-vulkan"),
        "llama-server@b100-vulkan is the activated build of llama-server; activate another "
        'build first (e.g. "backendmgr activate llama-server@b300-vulkan")',
    )
    refused(
        bm("uninstall", "llama-server@b200", "llama-server@b999"), "b999 is not installed", code=2
    )
    assert builds() == before
    done = ok(bm("uninstall", "llama-server@b200", "llama-server@b300-vulkan"))
    assert done.stdout.splitlines()[0] == (
        "uninstalled llama-server@b200-vulkan, llama-server@b300-vulkan"
    )
    assert [b[0] for b in builds()] == ["llama-server@b100-vulkan"]
    assert rows() == ["llama-server", "llama-server@b100-vulkan"]


def test_an_uninstall_killed_before_its_folders_go_is_as_if_not_run(
    mirror: MirrorServer, mirror_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The config is changed first and the folders removed after: a kill between the two
    (here: at the removal) leaves the whole build there, and the same uninstall finishes the
    job. The other order left a row for a build that was gone: "not installed" to a second
    uninstall, "use uninstall" to backends remove, and only doctor --fix removed it."""
    import backendmgr.install.store as store_module

    for n, tag in enumerate(("b100", "b200")):
        publish_llama(mirror_root, tag, published_at=f"2026-09-0{n + 1}T00:00:00Z")
        ok(bm("install", "llama-server", tag))
    before = builds()

    def killed(entry: object) -> None:
        raise KeyboardInterrupt

    with monkeypatch.context() as patched:
        patched.setattr(store_module, "remove", killed)
        assert bm("uninstall", "llama-server@b200").returncode == 130
    assert builds() == before  # the build is all there: only its row went
    assert "llama-server@b200-vulkan is installed but has no registry row" in bm("doctor").stderr
    ok(bm("uninstall", "llama-server@b200"))  # the same command finishes the job
    assert [b[0] for b in builds()] == ["llama-server@b100-vulkan"]
    assert rows() == ["llama-server", "llama-server@b100-vulkan"]
    assert "everything is consistent" in ok(bm("doctor")).stdout


def test_the_only_build_needs_force_and_says_who_falls_back(
    mirror: MirrorServer, mirror_root: Path, tmp_path: Path, config_path: Path
) -> None:
    models_dir(tmp_path, config_path, "qwen3-8b", "tiny")
    publish_llama(mirror_root, "b100")
    ok(bm("install", "llama-server"))
    ok(bm("pin", "tiny", "llama-server@b100-vulkan"))
    refused(
        bm("uninstall", "llama-server@b100-vulkan"),
        "llama-server@b100-vulkan is the only build of llama-server; use --force",
    )
    assert rows() == ["llama-server", "llama-server@b100-vulkan"]

    forced = ok(bm("uninstall", "llama-server@b100-vulkan", "--force"))
    assert forced.stdout.splitlines()[0] == "uninstalled llama-server@b100-vulkan"
    assert forced.stderr.splitlines() == [
        "warning: stale pins now fall back: tiny",
        'warning: removed the "llama-server" row',
        "warning: these models lose their backend and fall back (SPEC §4): qwen3-8b, tiny",
    ]
    assert rows() == [] and builds() == []
    models = {m["id"]: m for m in json.loads(ok(bm("--json", "models")).stdout)}
    assert models["qwen3-8b"]["backend"]["reason"] == "no llm row; legacy server_exe"
    said = ok(bm("which", "qwen3-8b")).stdout.splitlines()
    assert said[1] == "  model → no row: no llm row; legacy server_exe"  # not "row None"
    assert 'stale pin "llama-server@b100-vulkan" ignored' in models["tiny"]["notes"]


# --- completion ------------------------------------------------------------------------------


def _exe_dir() -> Path:
    found = Path(sys.executable).parent / "backendmgr"
    if not found.exists():
        pytest.skip(f"no backendmgr console script beside {sys.executable}")
    return found.parent


# Each shell sources the generated script, shows what it registered, then completes the words
# given as arguments (bash and zsh call the completion function the way bash's completion
# machinery does; fish asks its own completion engine with ``complete -C``).
SHELL_PROGRAMS = {
    "bash": (
        ["bash", "--norc", "-c"],
        'source "$1"; shift; complete -p backendmgr; COMP_WORDS=("$@"); '
        "COMP_CWORD=$(( $# - 1 )); _backendmgr_complete; "
        'printf "<%s>\\n" "${COMPREPLY[@]}"',
        "complete -o default -F _backendmgr_complete backendmgr",
    ),
    "zsh": (
        ["zsh", "-f", "-c"],
        'source "$1"; shift; complete -p backendmgr; COMP_WORDS=("$@"); '
        "COMP_CWORD=$(( $# - 1 )); _backendmgr_complete; "
        'printf "<%s>\\n" "${COMPREPLY[@]}"',
        "complete -o default -F _backendmgr_complete backendmgr",
    ),
    "fish": (
        ["fish", "-c"],
        "source $argv[1]; complete -c backendmgr | head -n 1; "
        "set -l line (string join -- ' ' (string escape -- $argv[2..-2]))' '; "
        'test -n "$argv[-1]"; and set line "$line"(string escape -- $argv[-1]); '
        "for line in (complete -C $line); "
        'printf "<%s>\\n" (string split -f1 \\t -- $line); end',
        "'(__backendmgr_complete)'",  # fish versions spell the rest differently
    ),
}


def _complete(shell: str, script: Path, words: list[str]) -> list[str]:
    argv, program, registered = SHELL_PROGRAMS[shell]
    env = {**os.environ, "PATH": f"{_exe_dir()}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(
        [*argv, program, *([] if shell == "fish" else [shell]), str(script), "backendmgr", *words],
        capture_output=True,
        text=True,
        env=env,
        cwd=script.parent,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert any(registered in line for line in lines), lines  # the script registered itself
    return sorted(line[1:-1] for line in lines if line.startswith("<") and line != "<>")


@pytest.mark.parametrize("shell", SHELLS)
def test_completion_from_local_state_only(
    shell: str, tmp_path: Path, config_path: Path, mirror: MirrorServer, mirror_root: Path
) -> None:
    if shutil.which(shell) is None:
        pytest.skip(f"{shell} is not installed here; its script is only generated")
    hostile = "$(touch pwned)*"
    models_dir(tmp_path, config_path, "qwen3-8b", hostile)
    publish_llama(mirror_root, "b100", ["vulkan", "rocm"])
    ok(bm("install", "llama-server"))
    ok(bm("install", "llama-server", "--variant", "rocm"))
    mirror.stop()  # completion never uses the network
    script = tmp_path / f"backendmgr.{shell}"
    script.write_text(ok(bm("completion", shell)).stdout)

    def complete(*words: str) -> list[str]:
        return _complete(shell, script, list(words))

    assert complete("upd") == ["update"]
    assert "__complete" not in complete("")
    assert complete("activate", "llama-server@b100-r") == ["llama-server@b100-rocm"]
    assert complete("uninstall", "llama-server@b100-rocm", "") == [
        "llama-server@b100-rocm",
        "llama-server@b100-vulkan",
    ]
    assert complete("install", "ll") == ["llama-server", "llama-swap"]
    assert complete("install", "--var") == ["--variant"]
    assert complete("--json", "pin", "qw") == ["qwen3-8b"]
    assert complete("pin", "qwen3-8b", "llama-server@b100-v") == ["llama-server@b100-vulkan"]
    assert complete("which", "$") == [hostile]
    assert complete("cache", "") == ["clean"]
    assert complete("completion", "z") == ["zsh"]
    # an option's value named in local state: --canary's models, bench's --build, --kind
    assert complete("activate", "llama-server@b100-rocm", "--canary", "qw") == ["qwen3-8b"]
    assert complete("bench", "qwen3-8b", "--build", "llama-server@b100-r") == [
        "llama-server@b100-rocm"
    ]
    assert complete("backends", "add", "x", "--kind", "vl") == ["vllm"]
    assert complete("bisect", "qwen3-8b", "--metric", "st") == ["starts"]
    assert not (tmp_path / "pwned").exists()


def test_complete_is_fast_and_never_imports_httpx() -> None:
    probe = (
        "import sys\n"
        "from backendmgr.cli.main import main\n"
        "main(['__complete', '--', 'activate', ''])\n"
        "assert 'httpx' not in sys.modules, 'httpx imported'\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
