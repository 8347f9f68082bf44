"""An install decides how to fetch its archive from the name alone (install/formats.py); the
unpacking machinery loads only once the download has started (issue 34)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from backendmgr.install import extract
from backendmgr.install.formats import MAX_TOTAL, archive_format, streamable


@pytest.mark.parametrize(
    ("name", "kind", "streamed"),
    [
        ("llama-b1-bin-ubuntu-x64.tar.gz", "tar", True),
        ("tool.TGZ", "tar", True),
        ("tool.tar.xz", "tar", True),
        ("tool.tar.zst", "tar.zst", False),
        ("tool.tar", "tar", False),
        ("llama-b1-bin-win-cuda-x64.zip", "zip", True),
        ("llama-server", "bare", False),
    ],
)
def test_the_kind_of_an_archive_comes_from_its_name(name: str, kind: str, streamed: bool) -> None:
    assert archive_format(name) == kind
    assert streamable(name) is streamed
    assert extract.archive_format is archive_format  # one rule, wherever it is imported from
    assert extract.MAX_TOTAL == MAX_TOTAL


def test_an_archive_install_loads_no_unpacker_before_its_download() -> None:
    """tarfile, zipfile, ISA-L and the writers load in the unpacking thread, beside the
    download: importing the install job (what an install does before it) loads none."""
    code = (
        "import sys\n"
        "import backendmgr.install.archive_job\n"
        "loaded = [m for m in ('tarfile', 'isal', 'backendmgr.install.extract',\n"
        "          'backendmgr.install.writer', 'backendmgr.install.commit') if m in sys.modules]\n"
        "print(loaded)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"
