"""Why a program cannot start, in exec's words: a path to something there that cannot be run
(a folder, a FIFO) is "Permission denied", not "No such file or directory"."""

from __future__ import annotations

import errno
import os
import sys
from pathlib import Path

import pytest

from backendmgr._proc import dying_with_parent

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux's shim")


def _errno(argv0: str) -> int | None:
    with pytest.raises(OSError) as caught:
        dying_with_parent([argv0, "--version"])
    return caught.value.errno


def test_what_is_there_but_cannot_run_is_denied(tmp_path: Path) -> None:
    (tmp_path / "dir").mkdir()
    os.mkfifo(tmp_path / "fifo")
    plain = tmp_path / "plain"
    plain.write_text("#!/bin/sh\n")  # not executable
    for what in ("dir", "fifo", "plain"):
        assert _errno(str(tmp_path / what)) == errno.EACCES, what


def test_what_is_not_there_is_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    assert _errno(str(tmp_path / "dangling")) == errno.ENOENT
    assert _errno(str(tmp_path / "nowhere")) == errno.ENOENT
    # a bare name is looked up on PATH only, whatever the working folder holds
    (tmp_path / "llama-swap-x").write_text("#!/bin/sh\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert _errno("llama-swap-x") == errno.ENOENT
