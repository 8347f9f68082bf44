"""``unlisted_flags`` (issue 32's flag check): what a switch would break, fit for a message."""

from __future__ import annotations

from backendmgr.catalog.capabilities import (
    MAX_OPTION_LEN,
    UNLISTED_SHOWN,
    Capabilities,
    unlisted_flags,
)


def caps(*options: str) -> Capabilities:
    return Capabilities(options=list(options))


def test_flags_the_build_lacks_values_and_negative_numbers_are_not_flags() -> None:
    got = unlisted_flags("-t 2 -dio --n-gpu-layers -1 --foo=bar --foo", caps("-t", "--threads"))
    assert got == ["-dio", "--n-gpu-layers", "--foo"]
    assert unlisted_flags("--x", caps()) == ["--x"]
    assert unlisted_flags("--x 'unclosed", caps()) == []  # does not split: set refuses it
    assert unlisted_flags("--x", Capabilities()) == []  # options unknown: nothing to say


def test_a_hostile_value_names_few_flags_each_cut_short() -> None:
    many = " ".join(f"--f{i}" for i in range(20_000))
    assert unlisted_flags(many, caps()) == [f"--f{i}" for i in range(UNLISTED_SHOWN)]
    (long,) = unlisted_flags("--" + "a" * 100_000, caps())
    assert long == "--" + "a" * (MAX_OPTION_LEN - 2) + "…"
