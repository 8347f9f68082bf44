"""The components' ids a read asks for (``which``, <TAB>) are the catalog's own, with or
without the user's manifests, and malformed user manifests are still reported."""

from __future__ import annotations

from pathlib import Path

import pytest

from backendmgr.config.paths import Paths
from backendmgr.errors import ConfigError
from backendmgr.manager.context import Context
from tests.support.wheels import TOY_MANIFEST


def _context(tmp_path: Path) -> Context:
    return Context(Paths.resolve(config=tmp_path / "cfg" / "config.yaml", home=tmp_path / "h"))


def test_without_user_manifests_the_ids_are_the_catalogs(tmp_path: Path) -> None:
    ids = _context(tmp_path).component_ids()
    assert "llama-server" in ids and ids == _context(tmp_path).catalog.ids()


def test_a_user_manifest_adds_its_id_as_the_catalog_does(tmp_path: Path) -> None:
    manifests = tmp_path / "cfg" / "manifests"
    manifests.mkdir(parents=True)
    (manifests / "anything.yaml").write_text(TOY_MANIFEST)  # the id is inside, not the name
    ids = _context(tmp_path).component_ids()
    assert "toy" in ids and "anything" not in ids
    assert ids == _context(tmp_path).catalog.ids()


def test_a_broken_user_manifest_is_reported(tmp_path: Path) -> None:
    manifests = tmp_path / "cfg" / "manifests"
    manifests.mkdir(parents=True)
    (manifests / "bad.yaml").write_text("id: [\n")
    with pytest.raises(ConfigError):
        _context(tmp_path).component_ids()
