"""Model shapes the sizing tests share (a large qwen3 and a small qwen2)."""

from __future__ import annotations

from typing import Any

from backendmgr.discovery.meta import ModelMeta


def fields_of(value: Any) -> dict[str, Any]:
    """A plain record's fields (its slots) by name: what two of them compare by."""
    return {name: getattr(value, name) for name in type(value).__slots__}


def changed(meta: ModelMeta, **changes: Any) -> ModelMeta:
    """``meta`` with ``changes`` (a plain class: ``dataclasses.replace`` of a header)."""
    return ModelMeta(**{**fields_of(meta), **changes})


BIG = ModelMeta(
    architecture="qwen3",
    block_count=48,
    head_count=32,
    head_count_kv=8,
    key_length=128,
    value_length=128,
    context_length=262144,
)
SMALL = ModelMeta(
    architecture="qwen2",
    block_count=24,
    head_count=14,
    head_count_kv=2,
    key_length=64,
    value_length=64,
    context_length=32768,
)
