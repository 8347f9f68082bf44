"""One long-lived store (the web API's) against a config edited by hand between its reads:
bytes of the same length, bytes it saw before while the snapshot beside them holds another
file's settings, an invalid file in between. Every read says what the file says now."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from backendmgr.config.models import ModelOverride, Settings
from backendmgr.config.store import ConfigStore
from backendmgr.errors import ConfigError


def test_a_long_lived_store_never_reads_stale_settings(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    first = b"ttl: 601\n"
    config.write_bytes(first)
    store = ConfigStore(config)
    assert store.read().ttl == 601
    config.write_bytes(b"ttl: 602\n")  # the same length, other bytes
    assert store.read().ttl == 602
    assert store.load().settings.ttl == 602
    config.write_bytes(first)  # bytes this store saw, the snapshot now another file's
    assert store.read().ttl == 601

    def set_ctx(settings: Settings) -> tuple[Settings, None]:
        models = {**settings.models, "m": ModelOverride(ctx=4242)}
        return replace(settings, models=models), None

    store.update(set_ctx)
    written = config.read_bytes()
    assert store.read().models["m"].ctx == 4242
    config.write_bytes(first)
    assert "m" not in store.read().models
    config.write_bytes(b"ttl: 6x1\n")
    with pytest.raises(ConfigError):
        store.read()
    config.write_bytes(written)
    assert store.read().models["m"].ctx == 4242
    other = ConfigStore(config)  # another process's store: the snapshot agrees
    assert other.read() == store.read()
