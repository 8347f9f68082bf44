"""Hostile config files and manifests through the real CLI: deep nesting, alias bombs, links,
read-only files, comment-only files and file modes."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cli import Cli, CliResult, run_backendmgr


def alias_bomb(levels: int) -> str:
    """The "billion laughs": each level is ten aliases of the one before."""
    lines = ["a: &a [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, levels):
        name, prev = chr(ord("a") + i), chr(ord("a") + i - 1)
        lines.append(f"{name}: &{name} [{', '.join([f'*{prev}'] * 10)}]")
    return "\n".join(lines) + "\n"


def long_aliases(count: int) -> str:
    """One 1 MiB value and ``count`` aliases of it: a 1 MiB file that is ``count`` MiB to
    every check, copy and write of the settings (and of a snapshot of them)."""
    refs = "".join(f"    m{i}: *x\n" for i in range(count))
    return "llama_swap:\n  macros:\n    big: &x '" + "a" * (1 << 20) + "'\n" + refs


def deep(levels: int) -> str:
    return "models_dirs: " + "[" * levels + "]" * levels + "\n"


def one_error(result: CliResult, code: int = 1) -> str:
    assert result.code == code, result
    lines = [line for line in result.err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.err
    assert "Traceback" not in result.err
    return lines[0]


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (deep(5000), "line 1: nested more than 64 levels deep"),
        (alias_bomb(10), "line 6: aliases expand to more than 200000 values"),
        ("models: &b {k: [*b]}\n", "line 1: alias *b is inside the value it names"),
        (long_aliases(20), "line 18: aliases expand to more than 16 MiB of text"),
    ],
)
def test_hostile_config_is_one_line_error_and_changes_nothing(
    cli: Cli, config_path: Path, text: str, says: str
) -> None:
    config_path.parent.mkdir(parents=True)
    config_path.write_text(text)
    for argv in (("list",), ("backends",), ("set", "m1", "ctx=4096")):
        line = one_error(cli(*argv))
        assert str(config_path) in line and says in line, line
    assert config_path.read_text() == text


def test_hostile_config_in_a_child_process_has_no_traceback(config_path: Path) -> None:
    config_path.parent.mkdir(parents=True)
    config_path.write_text(deep(5000))
    result = run_backendmgr("list", timeout=30)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        f"error: {config_path} line 1: nested more than 64 levels deep; flatten the YAML"
    ]


def test_anchors_within_the_limit_still_work(cli: Cli, config_path: Path) -> None:
    config_path.parent.mkdir(parents=True)
    config_path.write_text("models:\n  a: &shared {ctx: 8192, extra_args: --jinja}\n  b: *shared\n")
    assert cli("set", "c", "ctx=4096").code == 0
    text = config_path.read_text()
    assert "&shared" in text and "*shared" in text and "c:\n    ctx: 4096" in text


def test_oversized_config_is_refused_without_reading_it_all(cli: Cli, config_path: Path) -> None:
    config_path.parent.mkdir(parents=True)
    with config_path.open("wb") as fh:
        fh.write(b"# padding\n")
        fh.truncate(64 << 20)  # sparse: 64 MiB of NUL bytes
    line = one_error(cli("list"))
    assert "larger than 8 MiB" in line


@pytest.mark.parametrize("text", [deep(5000), alias_bomb(10)])
def test_hostile_user_manifest_is_one_line_error(cli: Cli, config_path: Path, text: str) -> None:
    manifests = config_path.parent / "manifests"
    manifests.mkdir(parents=True)
    (manifests / "evil.yaml").write_text(text)
    line = one_error(cli("catalog"))
    assert line.startswith(f"error: manifest {manifests / 'evil.yaml'} line ")


@pytest.fixture
def umask_022() -> Iterator[None]:
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


def test_symlinked_config_is_edited_through_the_link(
    cli: Cli, config_path: Path, tmp_path: Path, umask_022: None
) -> None:
    dotfiles = tmp_path / "dotfiles"
    dotfiles.mkdir()
    real = dotfiles / "backendmgr.yaml"
    real.write_text("# from my dotfiles\nttl: 600\n")
    real.chmod(0o640)
    config_path.parent.mkdir(parents=True)
    config_path.symlink_to(Path("..") / "dotfiles" / "backendmgr.yaml")
    assert cli("set", "m1", "ctx=4096").code == 0
    assert config_path.is_symlink() and config_path.resolve() == real
    assert real.read_text() == "# from my dotfiles\nttl: 600\nmodels:\n  m1:\n    ctx: 4096\n"
    assert stat.S_IMODE(real.stat().st_mode) == 0o640
    assert leftovers(dotfiles) == [] and leftovers(config_path.parent) == []


def test_dangling_symlinked_config_creates_the_target(
    cli: Cli, config_path: Path, tmp_path: Path, umask_022: None
) -> None:
    real = tmp_path / "dotfiles" / "backendmgr.yaml"
    config_path.parent.mkdir(parents=True)
    config_path.symlink_to(real)
    assert cli("set", "m1", "ctx=4096").code == 0
    assert config_path.is_symlink() and real.read_text() == "models:\n  m1:\n    ctx: 4096\n"
    assert stat.S_IMODE(real.stat().st_mode) == 0o644


@pytest.mark.parametrize("via_link", [False, True])
def test_read_only_config_is_refused_and_left_alone(
    cli: Cli, config_path: Path, tmp_path: Path, via_link: bool
) -> None:
    config_path.parent.mkdir(parents=True)
    real = tmp_path / "ro.yaml" if via_link else config_path
    real.write_text("ttl: 600  # mine\n")
    if via_link:
        config_path.symlink_to(real)
    real.chmod(0o444)
    before = real.stat()
    line = one_error(cli("set", "m1", "ctx=4096"))
    assert line == (
        f"error: {config_path}{f' (a link to {real})' if via_link else ''} is read-only "
        "(mode 0444); backendmgr leaves it alone; make it writable (chmod u+w) to let "
        "backendmgr change it"
    )
    after = real.stat()
    assert real.read_text() == "ttl: 600  # mine\n"
    assert (after.st_ino, after.st_mtime_ns, stat.S_IMODE(after.st_mode)) == (
        before.st_ino,
        before.st_mtime_ns,
        0o444,
    )
    assert config_path.is_symlink() == via_link
    assert leftovers(real.parent) == []
    assert cli("list").code == 0  # reading it is fine


def test_comment_only_config_keeps_its_comments(cli: Cli, config_path: Path) -> None:
    config_path.parent.mkdir(parents=True)
    config_path.write_text("# my backendmgr settings\n\n# models live on the NAS\n---\n")
    assert cli("set", "m1", "ctx=4096").code == 0
    assert config_path.read_text() == (
        "# my backendmgr settings\n\n# models live on the NAS\nmodels:\n  m1:\n    ctx: 4096\n"
    )
    assert cli("set", "m1", "ctx=8192").code == 0
    assert config_path.read_text().startswith("# my backendmgr settings\n\n# models live")


@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_new_files_get_the_umask_and_existing_files_keep_their_mode(
    cli: Cli, config_path: Path, tmp_path: Path, umask: int, mode: int
) -> None:
    old = os.umask(umask)
    try:
        assert cli("set", "m1", "ctx=4096").code == 0
        assert cli("generate").code == 0
    finally:
        os.umask(old)
    generated = config_path.parent / "llama-swap.yaml"
    for path in (config_path, generated):
        assert stat.S_IMODE(path.stat().st_mode) == mode, path
    config_path.chmod(0o600)
    assert cli("set", "m1", "ctx=8192").code == 0
    assert stat.S_IMODE(config_path.stat().st_mode) == 0o600
    assert "8192" in config_path.read_text()


def test_hostile_llama_swap_value_is_refused_before_it_is_saved(
    cli: Cli, config_path: Path
) -> None:
    config_path.parent.mkdir(parents=True)
    config_path.write_text("vram_budget_gb: 16\n")
    bomb = "{" + alias_bomb(10).replace("\n", ", ").rstrip(", ") + "}"
    line = one_error(cli("set", "m1", "llama_swap=" + bomb), 2)  # a value it cannot take: usage
    assert "aliases expand to more than 200000 values" in line, line
    assert config_path.read_text() == "vram_budget_gb: 16\n"


def test_a_fifo_or_device_among_the_users_files_is_refused_without_waiting(
    config_path: Path, tmp_path: Path
) -> None:
    """A FIFO in a manifest's, the config's or a lock's place would hang the open (and a link
    to /dev/zero is no file): <TAB> leaves it out, a command says so in one line."""
    manifests = config_path.parent / "manifests"
    manifests.mkdir(parents=True)
    os.mkfifo(manifests / "fifo.yaml")
    (manifests / "zero.yaml").symlink_to("/dev/zero")
    done = run_backendmgr("__complete", "--", "install", "", timeout=30)
    assert done.returncode == 0 and "llama-server" in done.stdout.split(), done
    done = run_backendmgr("__complete", "--", "install", "fifo", "--variant", "", timeout=30)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done
    done = run_backendmgr("install", "llama-server", "--dry-run", timeout=30)
    assert done.returncode == 1 and done.stderr.count("\n") == 1, done
    assert "fifo.yaml: not a regular file" in done.stderr, done
    (manifests / "fifo.yaml").unlink()
    (manifests / "zero.yaml").unlink()
    os.mkfifo(config_path)
    done = run_backendmgr("list", timeout=30)
    assert done.returncode == 1 and "config.yaml: not a regular file" in done.stderr, done
    os.mkfifo(tmp_path / "backendmgr.lock")
    done = run_backendmgr("sync", str(tmp_path / "backendmgr.lock"), timeout=30)
    assert done.returncode != 0 and "lock: not a regular file" in done.stderr, done


def test_a_fifo_where_the_llama_swap_config_goes_is_not_waited_on(config_path: Path) -> None:
    """The generated file's place is the user's folder: a FIFO there hung ``generate``,
    ``generate --check`` and ``doctor`` (its open waits for a writer, and Ctrl-C did not stop
    it). Each now answers at once; ``generate`` leaves it a FIFO, as it leaves a folder or a
    device there: someone's pipe is not a file to replace."""
    config_path.parent.mkdir(parents=True, exist_ok=True)
    target = config_path.parent / "llama-swap.yaml"
    os.mkfifo(target)
    done = run_backendmgr("generate", "--check", timeout=30)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done
    done = run_backendmgr("doctor", timeout=30)
    assert done.returncode == 1 and "llama-swap.yaml: not a regular file" in done.stderr, done
    assert "Traceback" not in done.stderr, done
    done = run_backendmgr("generate", timeout=30)
    assert done.returncode == 1, done
    assert f"{target} is a FIFO; backendmgr replaces only regular files" in done.stderr, done
    assert stat.S_ISFIFO(target.lstat().st_mode)
    before = config_path.read_bytes() if config_path.exists() else None
    done = run_backendmgr("set", "m1", "ctx=4096", timeout=30)  # a change that regenerates
    assert done.returncode == 1 and "is a FIFO" in done.stderr, done
    assert (config_path.read_bytes() if config_path.exists() else None) == before
    assert stat.S_ISFIFO(target.lstat().st_mode)
