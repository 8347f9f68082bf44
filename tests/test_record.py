"""The record mechanism: pydantic validates what people write, :func:`load` what we wrote,
and both run the same field checks and rule; a copy made with ``replace`` does too."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import field
from pathlib import Path
from typing import Annotated, Any, Literal

import pytest

from backendmgr.errors import validation_problem
from backendmgr.immutable import by_fields_eq, by_fields_hash, frozen
from backendmgr.record import After, Before, Invalid, Limit, Record, instant, load, plain, validate


def _device(value: Any) -> Any:
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


def _one_word(value: str) -> str:
    if " " in value:
        raise ValueError("must be one word")
    return value.lower()


@frozen(kw_only=True, repr=True, eq=True)
class Row(Record):
    id: Annotated[str, After(_one_word)]
    path: Path
    kind: Literal["llama", "vllm"] = "llama"


@frozen(kw_only=True, repr=True, eq=True)
class Override(Record):
    ctx: Annotated[int | None, Limit(gt=0)] = None
    util: Annotated[float | None, Limit(gt=0, le=1)] = None
    device: Annotated[str | None, Before(_device)] = None
    url: Annotated[str | None, Limit(pattern=r"^https?://\S+$")] = None


@frozen(kw_only=True, repr=True, eq=True)
class Settings(Record):
    ttl: Annotated[int, Limit(ge=0)] = 600
    backends: list[Row] = field(default_factory=list)
    models: dict[str, Override] = field(default_factory=dict)
    pair: tuple[str, int] | None = None

    def rule(self) -> str | None:
        return "at most two rows" if len(self.backends) > 2 else None


def json_nested(depth: int) -> Any:
    """A list in a list … ``depth`` deep, made without recursion."""
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


GOOD = {
    "ttl": 5,
    "backends": [{"id": "A", "path": "/x", "kind": "vllm"}],
    "models": {"m": {"ctx": 5, "device": "1", "util": 0.5}},
    "pair": ["a", 1],
}


def test_both_readers_agree_on_good_data() -> None:
    people = validate(Settings, {**GOOD, "ttl": "5", "models": {"m": {"ctx": 5, "device": 1}}})
    assert people.backends[0].id == "a"  # the check normalised it
    assert people.models["m"].device == "1"  # Before turned the number into the text
    ours = load(Settings, plain(people))
    assert ours == people
    assert plain(ours)["backends"][0]["path"] == "/x"
    assert plain(Override(ctx=1), drop_none=True) == {"ctx": 1}


@pytest.mark.parametrize(
    ("data", "pydantic_says", "load_says"),
    [
        ({"ttl": -1}, "ttl: Input should be greater than or equal to 0", "ttl: Input should be"),
        ({"models": {"m": {"ctx": 0}}}, "models.m.ctx: Input should be greater than 0", "m.ctx"),
        ({"models": {"m": {"util": 1.5}}}, "less than or equal to 1", "util: Input should"),
        ({"backends": [{"id": "a b", "path": "x"}]}, "must be one word", "backends[0].id"),
        ({"zz": 1}, "zz: Extra inputs are not permitted", "zz: not a field of Settings"),
        ({"backends": [{"id": "a", "path": "b"}] * 3}, "at most two rows", "at most two rows"),
        ({"models": {"m": {"url": "ftp://x"}}}, "String should match pattern", "url"),
        ({"backends": [{"id": "a", "path": "b", "kind": "x"}]}, "kind", "expected one of"),
    ],
)
def test_both_readers_refuse_bad_data(
    data: dict[str, Any], pydantic_says: str, load_says: str
) -> None:
    with pytest.raises(ValueError) as caught:
        validate(Settings, data)
    assert pydantic_says in validation_problem(caught.value).line()  # type: ignore[arg-type]
    with pytest.raises(Invalid, match=r"^.+: .+") as ours:
        load(Settings, data)
    assert load_says in str(ours.value)


@pytest.mark.parametrize(
    ("data", "says"),
    [
        ({"ttl": "5"}, "ttl: expected an integer"),  # what we wrote is never converted
        ({"ttl": True}, "ttl: expected an integer"),
        ({"backends": [{"id": "a"}]}, "backends[0].path: missing"),
        ({"backends": {"id": "a"}}, "backends: expected a list"),
        ({"pair": ["a", "b"]}, "pair[1]: expected an integer"),
        ({"models": {"m": []}}, "m: expected a mapping"),
        ([], "Settings: expected a mapping"),
    ],
)
def test_load_is_strict(data: Any, says: str) -> None:
    with pytest.raises(Invalid) as caught:
        load(Settings, data)
    assert says in str(caught.value)


def test_a_copy_is_checked_as_a_new_record_is() -> None:
    settings = load(Settings, GOOD)
    with pytest.raises(ValueError, match="ttl: Input should be greater than or equal to 0"):
        dataclasses.replace(settings, ttl=-5)
    with pytest.raises(ValueError, match="id: must be one word"):
        Row(id="a b", path=Path("x"))
    assert dataclasses.replace(settings, ttl=7).ttl == 7


@frozen(kw_only=True, repr=True, eq=True)
class Lazy(Record):
    ctx: Annotated[int | None, Limit(gt=0)] = None
    word: Annotated[str | None, After(_one_word)] = None


def test_a_record_of_nothing_but_none_evaluates_no_field_type() -> None:
    """Every check passes None, so a record made with every field None (a model without
    overrides) is made without evaluating its field types; one value is checked as ever."""
    from backendmgr import record

    assert Lazy().ctx is None
    assert Lazy not in record._HINTS
    with pytest.raises(ValueError, match="ctx: Input should be greater than 0"):
        Lazy(ctx=0)
    with pytest.raises(ValueError, match="word: must be one word"):
        Lazy(word="a b")
    assert Lazy(word="A").word == "a"
    assert Lazy().word is None  # and None again, once the checks are known


@frozen(kw_only=True, repr=True, eq=True)
class Free(Record):
    name: str = ""
    size: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)


@pytest.mark.parametrize(
    ("data", "says"),
    [
        ({"size": 10**400}, "size: number too large"),  # float() of it: OverflowError
        ({"size": float("nan")}, "size: not a number (NaN)"),
        ({"name": "a\ud800b"}, "name: not text (a lone surrogate)"),
        ({"extra": {"k": "\udfff"}}, "extra.k: not text"),
        ({"extra": {"\ud800": 1}}, "extra: not text"),
        ({"extra": {"k": [float("nan")]}}, "extra.k: not a number (NaN)"),
        ({"extra": {"k": json_nested(70)}}, "extra.k: nested deeper than 64 levels"),
        ({"extra": {"k": json_nested(5000)}}, "extra.k: nested deeper than 64 levels"),
    ],
)
def test_load_refuses_what_no_writer_of_ours_makes(data: Any, says: str) -> None:
    """Each of these once passed :func:`load` and then failed later, far from the file (an
    OverflowError, a UnicodeEncodeError printing, a RecursionError in a rule or the emitter),
    or showed NaN as a value."""
    with pytest.raises(Invalid, match=re.escape(says)):
        load(Free, data)


def test_load_keeps_free_form_data_as_deep_as_a_config_may_nest() -> None:
    assert load(Free, {"extra": {"k": json_nested(60)}, "size": 10**300}).size == 1e300
    assert load(Free, {"name": "naïve ☃"}).name == "naïve ☃"


@pytest.mark.parametrize("when", ["9999-12-31T23:59:59-12:00", "0001-01-01T00:00:00+12:00"])
def test_a_time_at_the_calendars_end_is_no_time_of_ours(when: str) -> None:
    """A verify result or a receipt holding one was read, then ``models`` failed saying how
    long ago it was (OverflowError): now the record is refused as any other bad value."""
    from backendmgr.manager.verify_cache import _loaded, verified_text

    kept = {"id": "m", "ok": True, "reason": None, "ready_s": 1.0, "gpu_gib": 2.0}
    kept |= {"est_vram_gb": None, "verified_at": when}
    assert _loaded(kept) is None and verified_text(_loaded(kept)) == "not verified"
    assert _loaded({**kept, "verified_at": "2026-01-01T10:00:00+02:00"}) is not None
    with pytest.raises(Invalid, match="not a time backendmgr writes"):
        load(Stamped, {"at": when})


@frozen(kw_only=True, repr=True, eq=True)
class Stamped(Record):
    at: Annotated[str, After(instant)]


@frozen(kw_only=True)
class _Uncompared(Record):
    id: str


def test_a_record_without_eq_compares_by_identity_not_by_the_base_s_no_fields() -> None:
    """A record that switches its generated methods off (one no code compares, hashes or
    prints: issue 30, each costs a compile at import) gets object's, never the base's."""
    one, other = _Uncompared(id="a"), _Uncompared(id="b")
    assert one != other and one == one
    assert hash(one) != hash(other)
    assert "_Uncompared object at" in repr(one)
    # and one that keeps them compares its own fields
    assert Row(id="a", path=Path("/x")) == Row(id="a", path=Path("/x"))
    assert Row(id="a", path=Path("/x")) != Row(id="b", path=Path("/x"))


def _package_dataclasses() -> list[type]:
    """Every dataclass the package's modules define."""
    import importlib
    import pkgutil

    import backendmgr

    found: list[type] = []
    for info in pkgutil.walk_packages(backendmgr.__path__, "backendmgr."):
        if info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        found += [
            cls
            for cls in vars(module).values()
            if isinstance(cls, type)
            and dataclasses.is_dataclass(cls)
            and cls.__module__ == module.__name__
        ]
    return found


def test_no_dataclass_inherits_a_method_it_switched_off() -> None:
    """A dataclass that makes no ``__eq__``/``__hash__``/``__repr__`` (issue 30) must not get
    one that dataclasses generated for a base, which sees only the base's fields."""
    wrong = []
    ours = (by_fields_eq, by_fields_hash)  # frozen's, by fields: made as dataclasses' are
    for cls in _package_dataclasses():
        params = cls.__dataclass_params__  # type: ignore[attr-defined]
        by_fields = params.eq or cls.__dict__.get("__eq__") is by_fields_eq
        for name, made in (
            ("__eq__", by_fields),
            ("__hash__", by_fields),
            ("__repr__", params.repr),
        ):
            owner = next(c for c in cls.__mro__ if name in c.__dict__)
            method = getattr(owner.__dict__[name], "__qualname__", "")
            generated = owner.__dict__[name] in ours or (
                dataclasses.is_dataclass(owner) and method == f"{owner.__qualname__}.{name}"
            )
            if not made and owner is not cls and generated:
                wrong.append(
                    f"{cls.__module__}.{cls.__qualname__}.{name} from {owner.__qualname__}"
                )
    assert wrong == []


def test_no_dataclass_is_frozen_at_run_time() -> None:
    """An immutable dataclass is declared with :func:`~backendmgr.immutable.frozen` (checked
    by mypy), never ``@dataclass(frozen=True)``, which costs twice as much to create at every
    start (issue 30); one that compares by its fields still hashes by them."""
    every = _package_dataclasses()
    assert len(every) > 100
    assert [c.__qualname__ for c in every if c.__dataclass_params__.frozen] == []  # type: ignore[attr-defined]
    one, other = Override(ctx=1), Override(ctx=1)
    assert hash(one) == hash(other) and len({one, other, Row(id="a", path=Path("/x"))}) == 2


_ASSIGNMENTS = """\
import dataclasses
from backendmgr.config.models import Settings
from backendmgr.contract import Arg
from backendmgr.discovery.meta import ModelMeta
from backendmgr.immutable import by_fields_eq, by_fields_hash, frozen
from backendmgr.record import Record

@frozen(kw_only=True, repr=True, eq=True)
class Mine(Record):
    x: int

@dataclasses.dataclass
class Mutable:
    x: int

Settings().ttl = 5
Arg(help="h").flag = "f"
ModelMeta().quant = "q"
Mine(x=1).x = 2
Mutable(x=1).x = 2
dataclasses.replace(Mine(x=1), x=2)
"""


def test_the_type_checker_refuses_an_assignment_to_a_record(tmp_path: Path) -> None:
    """Records are immutable by type, not at run time: ``mypy --strict`` (CI) must refuse an
    assignment to a field of a real record, of a request's declaration, of a plain record
    (``Final``: a header) and of a new record, and only those (the plain dataclass and the
    copy are fine)."""
    import mypy.api

    root = Path(__file__).resolve().parents[1]
    snippet = tmp_path / "assign.py"
    snippet.write_text(_ASSIGNMENTS, encoding="utf-8")
    # only these files: their other imports are skipped (Any), so it runs in about a second
    files = ["config/models.py", "contract.py", "discovery/meta.py", "immutable.py", "record.py"]
    out, err, _ = mypy.api.run(
        [
            f"--config-file={root / 'pyproject.toml'}",
            "--follow-imports=skip",
            "--no-incremental",
            "--cache-dir=" + str(tmp_path / "cache"),
            str(snippet),
            *(str(root / "backendmgr" / f) for f in files),
        ]
    )
    said = sorted(
        line.split(": error: ")[1]
        for line in out.splitlines()
        if line.startswith(str(snippet)) and ": error: " in line
    )
    assert said == [
        'Cannot assign to final attribute "flag"  [misc]',
        'Cannot assign to final attribute "quant"  [misc]',
        'Property "ttl" defined in "Settings" is read-only  [misc]',
        'Property "x" defined in "Mine" is read-only  [misc]',
    ], out + err


def test_frozen_compares_and_hashes_as_dataclasses_does() -> None:
    """``frozen``'s equality and hash by fields, written once, agree with the ones
    dataclasses would compile per class: the same class only, fields in order, a field's
    ``compare=False`` honoured, one field or none as well as many."""

    def both(**options: Any) -> tuple[type, type]:
        def body(cls_name: str) -> type:
            ns = {
                "__annotations__": {"a": int, "b": str, "c": int},
                "c": dataclasses.field(default=0, compare=False),
            }
            return type(cls_name, (), ns)

        return frozen(eq=True, **options)(body("Ours")), dataclasses.dataclass(
            eq=True, unsafe_hash=True, **options
        )(body("Theirs"))

    for options in ({}, {"slots": True}):
        ours, theirs = both(**options)
        for x, y in (((1, "x", 0), (1, "x", 5)), ((1, "x", 0), (2, "x", 0)), ((1, "x", 0),) * 2):
            assert (ours(*x) == ours(*y)) == (theirs(*x) == theirs(*y))
            assert (hash(ours(*x)) == hash(ours(*y))) == (hash(theirs(*x)) == hash(theirs(*y)))
        assert (
            ours(1, "x") != theirs(1, "x") and ours(1, "x").__eq__(theirs(1, "x")) is NotImplemented
        )

    @frozen(eq=True)
    class One:
        a: int

    @frozen(eq=True)
    class Empty:
        pass

    assert One(1) == One(1) != One(2) and hash(One(1)) == hash((1,))
    assert Empty() == Empty() and hash(Empty()) == hash(())


def test_frozen_asks_for_repr_and_comparison() -> None:
    """Unasked, a record compares and hashes as any object and has object's repr: nothing is
    generated for it; ``repr=True`` and ``eq=True`` bring dataclasses' own."""

    @frozen(kw_only=True)
    class Plain:
        a: int

    @frozen(kw_only=True, repr=True, eq=True)
    class Valued:
        a: int

    one, same = Plain(a=1), Plain(a=1)
    assert one == one and one != same and hash(one) == object.__hash__(one)
    assert "__repr__" not in vars(Plain) and "__eq__" not in vars(Plain)
    assert Valued(a=1) == Valued(a=1) and repr(Valued(a=1)).endswith("Valued(a=1)")
