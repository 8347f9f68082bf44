"""The caches backendmgr keeps for itself (the GGUF header cache, the config's parsed snapshot,
the digest of the file it generated) are never written or chmod-ed through a link someone put
in their place: the file the link points at keeps its bytes and its mode, and the command still
works (a cache it cannot write only costs time). As bench.json and tuned.json (issue 32)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from tests.support.cli import run_backendmgr
from tests.support.ggufs import write_gguf
from tests.support.measure_standins import write_server


def test_a_link_in_a_caches_place_is_never_written_through(
    tmp_path: Path, config_path: Path
) -> None:
    models = tmp_path / "models"
    write_gguf(models / "small.gguf", "qwen3", layers=4, ctx=4096, size_bytes=1 << 20)
    server = write_server(tmp_path / "bin" / "srv" / "llama-server")
    config_path.parent.mkdir(parents=True)
    config_path.write_text(
        json.dumps(
            {
                "models_dirs": [str(models)],
                "backends": [{"id": "srv", "kind": "llama", "path": str(server), "default": True}],
            }
        )
    )
    config_path.chmod(0o644)
    home = tmp_path / "home"
    (home / "cache").mkdir(parents=True)
    (home / "generated").mkdir()
    victims = {}
    places = [
        home / "cache" / "gguf-meta.json",  # the GGUF header cache
        config_path.with_name(f".{config_path.name}.parsed.json"),  # the config's snapshot
    ]
    for n, place in enumerate(places):
        victim = tmp_path / f"victim{n}"
        victim.write_text("mine\n")
        victim.chmod(0o600)  # a private file: a chmod through the link would open it up
        place.symlink_to(victim)
        victims[place] = victim

    for args in (["models"], ["generate", "--force"], ["models"]):
        done = run_backendmgr(*args)
        assert done.returncode == 0, done.stderr
        assert "Traceback" not in done.stderr
    for place, victim in victims.items():
        assert place.is_symlink(), place
        assert victim.read_text() == "mine\n", place
        assert victim.stat().st_mode & 0o777 == 0o600, place

    # the generated file's digest: a link there is refused in one line, its target untouched
    record = next((home / "generated").glob("*.sha256"))
    victim = tmp_path / "victim-record"
    victim.write_text("mine\n")
    record.unlink()
    record.symlink_to(victim)
    done = run_backendmgr("generate", "--force")
    assert "Traceback" not in done.stderr
    assert victim.read_text() == "mine\n"
    assert os.path.islink(record)
