"""Hostile release tags (issue 19): a tag holding a newline and YAML, 5 000 digits or a
right-to-left override cannot name a build. It is refused where releases are read, before
anything is written, and the other releases stay usable. Through the real CLI against the
real loopback mirror."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from backendmgr.mirror import MirrorHandler, MirrorServer
from tests.support import publish_llama
from tests.support.cli import CliResult

Cli = Callable[..., CliResult]
LISTING = "/repos/ggml-org/llama.cpp/releases"
BY_TAG = "/repos/ggml-org/llama.cpp/releases/tags/"
HOSTILE = {
    "newline-yaml": "b1\nevil: true",
    "5000-digits": "b" + "9" * 5000,
    "rtl-override": "b1\u202egpj.exe",
}


def error_line(result: CliResult, code: int) -> str:
    """The one ``error:`` line of a failed command, and no traceback."""
    assert result.code == code, result
    assert "Traceback" not in result.err, result.err
    errors = [line for line in result.err.splitlines() if line.startswith("error")]
    assert len(errors) == 1, result.err
    return errors[0]


def hostile_release(mirror: MirrorServer, mirror_root: Path, tag: str) -> dict[str, Any]:
    """b100 published, and a newer release under ``tag`` shipping the same good assets (so
    only its tag is wrong): the listing and a lookup by tag both serve it."""
    publish_llama(mirror_root, "b100", published_at="2026-01-01T00:00:00Z")
    good = (mirror.releases("ggml-org", "llama.cpp") or [])[0]
    bad = {**good, "tag_name": tag, "name": tag, "published_at": "2026-02-01T00:00:00Z"}

    def serve(handler: MirrorHandler) -> bool:
        if handler.route == LISTING:
            handler.send_json(200, [bad, *(handler.server.releases("ggml-org", "llama.cpp") or [])])
            return True
        if handler.route.startswith(BY_TAG) and handler.route != BY_TAG + "b100":
            handler.send_json(200, bad)  # whatever tag was asked for, the hostile one answers
            return True
        return False

    mirror.hooks.append(serve)
    return bad


def built(home: Path) -> list[str]:
    folder = home / "builds" / "llama-server"
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


@pytest.mark.parametrize("tag", list(HOSTILE.values()), ids=list(HOSTILE))
def test_a_hostile_tag_installs_nothing_and_the_others_stay_usable(
    cli: Cli, mirror: MirrorServer, mirror_root: Path, tmp_path: Path, tag: str
) -> None:
    hostile_release(mirror, mirror_root, tag)
    home = tmp_path / "home"

    listed = cli("--json", "releases", "llama-server")
    assert listed.code == 0, listed
    assert [r["tag"] for r in json.loads(listed.out)] == ["b100"]

    line = error_line(cli("install", "llama-server", tag), 2)
    assert line.startswith(('error: release tag "b', 'error: argument version: release tag "b'))
    assert "\n" not in line and "\u202e" not in line and len(line) < 300
    assert "control character" in line or "characters long" in line
    assert built(home) == []  # nothing written: no folder, sanitised or not
    asked = [p for p, _ in mirror.requests if p.startswith(BY_TAG)]
    assert asked == []  # refused before any request

    # a good tag answered with the hostile release is refused as well
    line = error_line(cli("install", "llama-server", "b2"), 1)
    assert "refused tag" in line and "\u202e" not in line
    assert built(home) == []

    # the newest usable release installs, and every command still reads the data home
    assert cli("install", "llama-server").code == 0
    assert built(home) == ["b100-vulkan"]
    shown = json.loads(cli("--json", "list").out)
    assert [b["id"] for b in shown] == ["llama-server@b100-vulkan"]
    for words in (("doctor",), ("backends",), ("list",)):
        result = cli(*words)
        assert result.code == 0, (words, result)
        assert "For further information" not in result.out + result.err


@pytest.mark.parametrize("tag", list(HOSTILE.values()), ids=list(HOSTILE))
def test_a_receipt_with_a_hostile_version_is_not_a_build(
    cli: Cli, mirror: MirrorServer, mirror_root: Path, tmp_path: Path, tag: str
) -> None:
    """A data home written by an older backendmgr that installed such a tag: the receipt is
    not trusted, so list and doctor answer in lines instead of pydantic's dump."""
    publish_llama(mirror_root, "b100")
    assert cli("install", "llama-server").code == 0
    receipt_path = (
        tmp_path / "home" / "builds" / "llama-server" / "b100-vulkan" / ".backendmgr.json"
    )
    receipt = json.loads(receipt_path.read_text())
    receipt["version"] = tag
    receipt_path.write_text(json.dumps(receipt))
    for words in (("list",), ("doctor",), ("--json", "list")):
        result = cli(*words)
        assert "Traceback" not in result.err and "For further information" not in result.err
        assert result.code in (0, 1), (words, result)
        assert "\u202e" not in result.out + result.err
    assert json.loads(cli("--json", "list").out) == []
