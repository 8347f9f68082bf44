from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest

from backendmgr.config.models import BackendRow, Settings
from backendmgr.config.paths import Paths
from backendmgr.config.store import ConfigStore
from backendmgr.errors import ConfigError
from backendmgr.registry.installed import InstalledBuild
from backendmgr.registry.rows import sync_build_rows, upsert_managed

COMMENTED = """\
# backendmgr config, kept by hand
models_dirs: [/models, ~/hf]   # scanned
vram_budget_gb: 22
ttl: 600                       # seconds

backends:
  # the one I built myself
  - id: mine
    kind: llama
    path: "/opt/llama/llama-server"   # quoted on purpose
  - id: llama-server
    kind: llama
    path: /h/builds/llama-server/b2-vulkan/llama-server
    managed: true
    component: llama-server
    version: b2
    variant: vulkan
  - id: llama-server@b2-vulkan
    kind: llama
    path: /h/builds/llama-server/b2-vulkan/llama-server
    managed: true
    component: llama-server
    version: b2
    variant: vulkan
    build: true
models:
  qwen3-8b:   # my favourite
    ctx: 32768
"""


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_missing_file_is_empty_config_and_noop_update_writes_nothing(tmp_path: Path) -> None:
    store = ConfigStore(tmp_path / "none" / "config.yaml")
    assert store.read() == Settings()
    assert store.update(lambda s: (s, 1)) == 1
    assert not store.path.exists()


def test_empty_file_is_empty_config(tmp_path: Path) -> None:
    store = ConfigStore(write(tmp_path / "c.yaml", "# nothing yet\n"))
    assert store.read() == Settings()


def test_unchanged_update_leaves_file_byte_identical_and_untouched(tmp_path: Path) -> None:
    path = write(tmp_path / "c.yaml", COMMENTED)
    os.utime(path, (1_000_000, 1_000_000))
    store = ConfigStore(path)
    store.update(lambda s: (replace(s, ttl=600), None))
    assert path.read_text() == COMMENTED
    assert path.stat().st_mtime == 1_000_000


def test_resync_of_unchanged_build_rows_is_byte_identical(tmp_path: Path) -> None:
    path = write(tmp_path / "c.yaml", COMMENTED)
    os.utime(path, (1_000_000, 1_000_000))
    b2 = InstalledBuild(
        component="llama-server",
        version="b2",
        variant="vulkan",
        kind="llama",
        exe="/h/builds/llama-server/b2-vulkan/llama-server",
    )

    def resync(s: Settings) -> tuple[Settings, None]:
        rows, _ = upsert_managed(s.backends, b2)
        return replace(s, backends=sync_build_rows(rows, "llama-server", [b2])), None

    ConfigStore(path).update(resync)
    assert path.read_bytes() == COMMENTED.encode()
    assert path.stat().st_mtime == 1_000_000


def test_edit_keeps_comments_order_and_quotes(tmp_path: Path) -> None:
    path = write(tmp_path / "c.yaml", COMMENTED)
    store = ConfigStore(path)

    def change(s: Settings) -> tuple[Settings, None]:
        rows = [*s.backends, BackendRow(id="sd", kind="sd", path="/opt/sd")]
        return replace(s, vram_budget_gb=16.0, backends=rows), None

    store.update(change)
    text = path.read_text()
    assert text == COMMENTED.replace("vram_budget_gb: 22", "vram_budget_gb: 16.0").replace(
        "models:\n", "  - id: sd\n    kind: sd\n    path: /opt/sd\nmodels:\n"
    )


def test_file_mode_survives_atomic_write(tmp_path: Path) -> None:
    path = write(tmp_path / "c.yaml", "ttl: 5\n")
    path.chmod(0o600)
    ConfigStore(path).update(lambda s: (replace(s, ttl=7), None))
    assert path.read_text() == "ttl: 7\n"
    assert path.stat().st_mode & 0o777 == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        ".c.yaml.parsed.json",
        "c.yaml",
        "c.yaml.lock",
    ]
    assert (tmp_path / ".c.yaml.parsed.json").stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("ttl: 5\nbackends: [\n", r"c\.yaml line 3 column \d+: .*fix the YAML"),
        ("ttl: 5\ncolour: blue\n", r'c\.yaml line 2: unknown key "colour"$'),
        ("ttl: five\n", r"c\.yaml line 1: ttl: Input should be a valid integer"),
        (
            "backends:\n  - id: a\n    path: /a\n    colour: red\n",
            r'c\.yaml line 4: unknown key "colour" in backends\[0\]',
        ),
        (
            "backends:\n  - id: a\n    kind: llama\n",
            r'c\.yaml line 2: missing key "path" in backends\[0\]',
        ),
        (
            "backends:\n  - id: a\n    path: '  '\n",
            r"line 3: backends\[0\]\.path: path must not be blank",
        ),
        (
            "backends:\n  - {id: a, path: /a}\n  - {id: b, path: /b}\n  - {id: a, path: /c}\n",
            r'c\.yaml line 4: duplicate backend id "a"',
        ),
        ("models:\n  m:\n    ctx: -1\n", r"line 3: models\.m\.ctx: Input should be greater than 0"),
        ("models:\n  m:\n    vllm_gpu_util: 1.5\n", r"line 3: models\.m\.vllm_gpu_util"),
        ("models:\n  m:\n    kontext: 1\n", r'line 3: unknown key "kontext" in models\.m'),
        ("ttl: 1\nttl: 2\n", r"c\.yaml line 2 column 1: .*duplicate key"),
        ("- just\n- a list\n", r"c\.yaml line 1: the config must be a mapping"),
    ],
)
def test_bad_config_names_file_and_line(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path / "c.yaml", text)
    with pytest.raises(ConfigError, match=message) as info:
        ConfigStore(path).read()
    assert "\n" not in str(info.value)


def test_not_utf8_is_config_error(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_bytes(b"ttl: \xff\n")
    with pytest.raises(ConfigError, match="not UTF-8"):
        ConfigStore(path).read()


def test_models_dirs_accepts_one_string(tmp_path: Path) -> None:
    assert ConfigStore(write(tmp_path / "c.yaml", "models_dirs: /m\n")).read().models_dirs == ["/m"]


# --- paths ---------------------------------------------------------------------------------


def test_paths_explicit_beats_env_beats_platformdirs(tmp_path: Path) -> None:
    env = {"BACKENDMGR_CONFIG": str(tmp_path / "env.yaml"), "BACKENDMGR_HOME": str(tmp_path / "eh")}
    explicit = Paths.resolve(config=tmp_path / "x.yaml", home=tmp_path / "xh", environ=env)
    assert (explicit.config_file, explicit.home) == (tmp_path / "x.yaml", tmp_path / "xh")
    from_env = Paths.resolve(environ=env)
    assert (from_env.config_file, from_env.home) == (tmp_path / "env.yaml", tmp_path / "eh")
    import platformdirs

    default = Paths.resolve(environ={})
    assert default.config_file == platformdirs.user_config_path("backendmgr") / "config.yaml"
    assert default.home == platformdirs.user_data_path("backendmgr")
    assert default.builds == default.home / "builds"
    assert default.default_output == default.config_file.parent / "llama-swap.yaml"


def test_one_config_file_has_one_lock_whatever_names_it(tmp_path: Path) -> None:
    """A config linked from dotfiles and the same file by its own path (a cron job) take one
    lock, beside the file itself: two would let two commands lose each other's change."""
    real = tmp_path / "dots" / "bm.yaml"
    real.parent.mkdir()
    real.write_text("")
    link = tmp_path / "cfg" / "config.yaml"
    link.parent.mkdir()
    link.symlink_to(real)
    locks = {Paths.resolve(config=c, home=tmp_path / "h").config_lock for c in (link, real)}
    assert locks == {real.with_name("bm.yaml.lock")}
    plain = Paths.resolve(config=tmp_path / "x.yaml", home=tmp_path / "h").config_lock
    assert plain == tmp_path / "x.yaml.lock"


@pytest.mark.parametrize(
    ("segment", "expected"),
    [
        ("b11211", "b11211"),
        ("../../etc", ".._.._etc"),
        ("", "unknown"),
        ("..", "__"),
        ("a b/c", "a_b_c"),
        ("x" * 80, "x" * 64),
    ],
)
def test_sanitize_segment(segment: str, expected: str) -> None:
    from backendmgr._fs import sanitize_segment

    assert sanitize_segment(segment) == expected
