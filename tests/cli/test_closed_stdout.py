"""A reader that goes away (``backendmgr status | head -1``) ends the command quietly with the
status a shell gives a program stopped by SIGPIPE, never an ``error:`` line (issue 33)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from backendmgr.cli.main import CLOSED_STDOUT


@pytest.mark.parametrize(
    "args", [["config", "show"], ["status"], ["backends"], ["--json", "list"], ["catalog"]]
)
def test_a_closed_stdout_ends_quietly(args: list[str], config_path: Path) -> None:
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the first byte: every write meets a closed pipe
    try:
        done = subprocess.run(
            [sys.executable, "-m", "backendmgr", *args],
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
            check=False,
        )
    finally:
        os.close(write)
    assert "error:" not in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert done.returncode == CLOSED_STDOUT
