"""What a mutation says it changed, for people (:meth:`backendmgr.changes.Record.lines`)."""

from __future__ import annotations

import pytest

from backendmgr.changes import Record


@pytest.mark.parametrize(
    ("models", "said"),
    [
        ([], "rewrote out.yaml (no entry changed)"),
        (["b", "a"], "rewrote out.yaml (a, b)"),
        (
            [f"m{i:03}" for i in range(12)],
            f"rewrote out.yaml ({', '.join(f'm{i:03}' for i in range(12))})",
        ),
        (
            [f"m{i:03}" for i in range(200)],
            f"rewrote out.yaml ({', '.join(f'm{i:03}' for i in range(12))} and 188 more)",
        ),
    ],
)
def test_a_rewrite_names_at_most_twelve_models_and_counts_the_rest(
    models: list[str], said: str
) -> None:
    record = Record(config="config.yaml", output="out.yaml", models=models)
    assert record.lines() == ["updated config.yaml", said]
    document = record.document()
    assert document is not None and document["generated"]["models"] == sorted(models)  # all
