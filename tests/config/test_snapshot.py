"""The parsed snapshot beside the config (issue 30): an input cache that a read uses only
while it was made from the config file's very bytes, by this backendmgr."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import pytest

from backendmgr.config.models import ModelOverride, Settings
from backendmgr.config.snapshot import snapshot_path
from backendmgr.config.store import ConfigStore
from backendmgr.record import plain

CONFIG = """# mine
models_dirs: [/srv/models]   # the big disk
backends:
  - {id: my-llama, kind: custom, path: /opt/llama/llama-server, default: true}
models:
  qwen:
    ctx: 8192
    extra_args: "--jinja"
"""


def fresh(path: Path) -> Settings:
    """The settings parsed from the YAML alone, no snapshot."""
    return ConfigStore(path).load().settings


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "cfg" / "config.yaml"
    path.parent.mkdir()
    path.write_text(CONFIG)
    return path


def forge(config: Path, **document: object) -> None:
    """Put another document into the snapshot, keeping its stamp."""
    data = json.loads(snapshot_path(config).read_text())
    data["document"] = document
    snapshot_path(config).write_text(json.dumps(data))


def test_a_read_writes_the_snapshot_and_the_next_read_uses_it(config: Path) -> None:
    store = ConfigStore(config)
    assert not snapshot_path(config).exists()
    first = store.read()
    assert snapshot_path(config).exists() and first == fresh(config)
    assert store.read() == first
    forge(config, models_dirs=["/forged"])  # proves the next read takes the snapshot
    assert ConfigStore(config).read().models_dirs == ["/forged"]  # the next command's
    assert store.read() == first  # this store's: the bytes it read, as they validated


def test_a_store_reads_the_same_bytes_once(config: Path) -> None:
    """An edit reads the config several times (its checks, under the lock, the plan): the
    store reads the file whole each time, its settings again only when the bytes differ."""
    store = ConfigStore(config)
    first = store.read()
    snapshot_path(config).unlink()
    assert store.read() is first and not snapshot_path(config).exists()
    config.write_text(CONFIG.replace("8192", "8193"))
    assert store.read().models["qwen"].ctx == 8193


def test_any_change_to_the_config_bytes_is_parsed_again(config: Path) -> None:
    store = ConfigStore(config)
    store.read()
    forge(config, models_dirs=["/forged"])
    config.write_text(CONFIG.replace("8192", "8193"))  # a hand edit, same size
    assert store.read().models["qwen"].ctx == 8193
    assert store.read() == fresh(config)
    forge(config, models_dirs=["/forged"])
    stat = config.stat()
    config.write_text(CONFIG.replace("8192", "4096"))
    os.utime(config, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # same size and mtime
    assert store.read().models["qwen"].ctx == 4096  # the bytes' hash, not the stat, decides


def test_a_write_leaves_a_snapshot_of_what_it_wrote(config: Path) -> None:
    store = ConfigStore(config)

    def change(s: Settings) -> tuple[Settings, None]:
        models = dict(s.models) | {"new": ModelOverride(ctx=2048)}
        return replace(s, models=models), None

    store.update(change)
    raw = config.read_bytes()
    assert b"# the big disk" in raw  # the store's own edit, comments kept
    via_snapshot = store.read()
    assert via_snapshot.models["new"].ctx == 2048 and via_snapshot == fresh(config)
    forge(config, models_dirs=["/forged"])
    assert ConfigStore(config).read().models_dirs == ["/forged"]  # the update's, not a read's


@pytest.mark.parametrize(
    "stale",
    [
        lambda d: d["stamp"].update(format=0),
        lambda d: d["stamp"].update(backendmgr="0.0.0-other"),
        lambda d: d["stamp"].update(parser="ruamel.yaml 0.0.1"),
        lambda d: d["stamp"].update(source=d["stamp"]["source"] + "\n"),
        lambda d: d.update(document=[1, 2]),
        lambda d: d.update(document={"models_dirs": 7}),  # not valid settings
    ],
)
def test_a_stale_or_broken_snapshot_is_never_used(config: Path, stale: object) -> None:
    store = ConfigStore(config)
    store.read()
    data = json.loads(snapshot_path(config).read_text())
    data["document"]["models_dirs"] = ["/forged"]
    stale(data)  # type: ignore[operator]
    snapshot_path(config).write_text(json.dumps(data))
    assert ConfigStore(config).read() == fresh(config)
    for junk in (b"", b"{", b"[]", b"\xff" * 10):
        snapshot_path(config).write_bytes(junk)
        assert ConfigStore(config).read() == fresh(config)


def test_a_folder_that_cannot_hold_a_snapshot_still_reads(config: Path) -> None:
    config.parent.chmod(0o555)
    try:
        if os.access(config.parent, os.W_OK):
            pytest.skip("running as a user who writes anywhere")
        assert ConfigStore(config).read() == fresh(config)
        assert not snapshot_path(config).exists()
    finally:
        config.parent.chmod(0o755)


def test_the_snapshot_is_as_private_as_the_config(config: Path) -> None:
    config.chmod(0o600)
    ConfigStore(config).read()
    assert snapshot_path(config).stat().st_mode & 0o777 == 0o600
    config.chmod(0o640)
    config.write_text(CONFIG + "ttl: 5\n")
    ConfigStore(config).read()
    assert snapshot_path(config).stat().st_mode & 0o777 == 0o640
    config.chmod(0o600)  # made private later, the bytes unchanged: the next read follows
    ConfigStore(config).read()
    assert snapshot_path(config).stat().st_mode & 0o777 == 0o600


def test_a_missing_or_empty_config_writes_no_snapshot(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    assert ConfigStore(path).read() == Settings()
    path.write_text("# nothing yet\n")
    assert ConfigStore(path).read() == Settings()
    assert not snapshot_path(path).exists()


def test_no_snapshot_is_written_that_no_read_would_take(tmp_path: Path) -> None:
    """A quote is two bytes in the stamp's copy of the config and two in the document, and
    aliases repeat a value: a config under 8 MiB can make a snapshot over the 32 MiB a read
    takes, which every read would parse again and write again."""
    path = tmp_path / "config.yaml"
    quotes = '"' * (5 << 20)
    path.write_text(f"llama_swap:\n  macros:\n    q: &q '{quotes}'\n    r: *q\n    s: *q\n")
    assert ConfigStore(path).read().llama_swap["macros"]["s"] == quotes
    assert not snapshot_path(path).exists()
    assert not list(tmp_path.glob(".*")), "nor any half-written file"


@pytest.mark.parametrize("extra", ["", "max_unpacked_gb: 32\nvenv_smoke_timeout: 300.0\n"])
def test_a_read_from_the_snapshot_says_what_a_parse_says(config: Path, extra: str) -> None:
    """The snapshot holds the settings as validated; read back, every value is the parse's,
    down to its JSON: a whole-number default (``max_unpacked_gb: 32``) stays an integer, a
    value the file gives stays a float."""
    config.write_text(CONFIG + extra)
    store = ConfigStore(config)
    cold = store.read()
    assert (
        json.loads(snapshot_path(config).read_text())["document"]["models"]["qwen"]["ctx"] == 8192
    )
    warm = ConfigStore(config).read()
    assert json.dumps(plain(warm)) == json.dumps(plain(cold)) == json.dumps(plain(fresh(config)))


def _hostile(config: Path, attack: str) -> None:
    """Put ``attack`` in the snapshot's place, the stamp kept where there is a document."""
    where = snapshot_path(config)
    stamp = json.loads(where.read_text())["stamp"]
    where.unlink()
    deep = "[" * 900 + "1" + "]" * 900  # parses as JSON; a rule walking it would not finish
    documents = {
        "huge int": '{"max_unpacked_gb": 1' + "0" * 4000 + "}",
        "deep": '{"models": {"qwen": {"llama_swap": {"x": ' + deep + "}}}}",
        "surrogate": '{"output": "\\ud800"}',
        "nan": '{"llama_swap": {"healthCheckTimeout": NaN}}',
    }
    if attack == "fifo":
        os.mkfifo(where)
    elif attack == "link":
        where.symlink_to("/dev/zero")
    else:
        where.write_text(f'{{"stamp": {json.dumps(stamp)}, "document": {documents[attack]}}}')


@pytest.mark.parametrize("attack", ["fifo", "link", "huge int", "deep", "surrogate", "nan"])
def test_a_hostile_snapshot_is_parsed_again_through_the_cli(config: Path, attack: str) -> None:
    """A FIFO once hung every read; a 4000-digit float, a 900-deep passthrough or a lone
    surrogate passed the strict read and then failed the command (OverflowError, RecursionError,
    UnicodeEncodeError); a NaN showed as a setting. Each is now no snapshot: the YAML decides."""
    from tests.support.cli import run_backendmgr

    env = {"BACKENDMGR_CONFIG": str(config)}
    want = run_backendmgr("--json", "config", "show", env=env, timeout=30)
    assert want.returncode == 0, want.stderr
    _hostile(config, attack)
    got = run_backendmgr("--json", "config", "show", env=env, timeout=30)
    assert (got.returncode, got.stdout, got.stderr) == (0, want.stdout, want.stderr)


def test_a_snapshot_that_came_with_a_copy_of_its_config_is_not_used(
    config: Path, tmp_path: Path
) -> None:
    """A folder shipped with a config and a hand-made snapshot whose stamp matches the config's
    bytes (a cloned dotfiles repository, an archive): a read once took the hidden file's
    settings, not the YAML the user reviewed. The stamp names the file it was made from."""
    from tests.support.cli import run_backendmgr

    ConfigStore(config).read()
    forge(
        config, models_dirs=["/forged"], backends=[{"id": "evil", "kind": "custom", "path": "/x"}]
    )
    assert ConfigStore(config).read().models_dirs == ["/forged"]  # that very file: trusted
    copy = tmp_path / "clone" / "config.yaml"
    copy.parent.mkdir()
    for path in (config, snapshot_path(config)):  # as git, tar or cp -a would bring them
        (copy.parent / path.name).write_bytes(path.read_bytes())
    shown = run_backendmgr("--json", "config", "show", env={"BACKENDMGR_CONFIG": str(copy)})
    settings = json.loads(shown.stdout)
    assert shown.returncode == 0, shown.stderr
    assert "/forged" not in shown.stdout and "evil" not in shown.stdout, settings
    assert ConfigStore(copy).read() == fresh(copy)
