"""What tests share, one definition each; test modules import from here, never each other.

- ``fixtures``: the fixtures ``tests/conftest.py`` registers (isolated env, ``cli``, ``mirror``,
  ``setup``)
- ``cli``: ``CliResult``/``Cli``, running backendmgr in process or as a child, ``ok``,
  ``error_line``
- ``wait``: ``wait_until``/``await_until`` instead of sleeps
- ``archives``, ``releases``: real archives and releases laid out for the loopback mirror
- ``wheels``: real wheels for venv installs; ``ggufs``: real GGUF files and HF folders
- ``standins``: stand-in server programs; ``processes``: liveness of the children they start
- ``user``: a user's config and models; ``manager``: checks for Manager-driven tests
- ``web``: a served app, a ``serve`` process and job event streams; ``paths``: ROOT, SHARED
"""

from tests.support.archives import (
    Entry,
    empty_files_tar_gz,
    llama_entries,
    make_tar,
    make_tar_zst,
    make_zip,
    server_script,
    tree,
    zeros_bomb_tar_gz,
)
from tests.support.cli import Cli, CliResult, error_line, ok, run_backendmgr, spawn_backendmgr
from tests.support.releases import (
    B11211_ASSETS,
    NAME,
    OLD_ASSETS,
    VULKAN,
    DownloadGates,
    big_release,
    publish,
    publish_llama,
)
from tests.support.user import Setup, user_setup
from tests.support.wait import await_until, wait_until

__all__ = [
    "B11211_ASSETS",
    "NAME",
    "OLD_ASSETS",
    "VULKAN",
    "Cli",
    "CliResult",
    "DownloadGates",
    "Entry",
    "Setup",
    "await_until",
    "big_release",
    "empty_files_tar_gz",
    "error_line",
    "llama_entries",
    "make_tar",
    "make_tar_zst",
    "make_zip",
    "ok",
    "publish",
    "publish_llama",
    "run_backendmgr",
    "server_script",
    "spawn_backendmgr",
    "tree",
    "user_setup",
    "wait_until",
    "zeros_bomb_tar_gz",
]
