"""Every command built from a request has exactly its request's fields as options and operands,
with the request's defaults and limits: a value out of range is refused by the CLI (exit 2) in
the words the request (and so the HTTP API) uses. The walk covers every request class."""

from __future__ import annotations

import argparse
import dataclasses
import inspect
from collections.abc import Iterator
from typing import Any

import pytest

from backendmgr import requests as rq
from backendmgr import run_requests as rrq
from backendmgr.cli.options import default_of, kind_of
from backendmgr.cli.parser import UsageError, build_parser
from backendmgr.errors import InvalidInput
from backendmgr.web.http import adapter
from tests.support.cli import completed, run_in_process

# Options a command has beyond its request: those of a second request it makes when a flag
# says so (``--canary`` on activate and update, issue 32; verify's ``--repair``, issue 22).
CANARY = {"canary", "tolerance", "repeat", "prompt_words", "tokens", "timeout"}
EXTRAS: dict[str, set[str]] = {
    "activate": CANARY,
    "update": CANARY,
    "verify": {"repair", "dry_run"},
}
# that second request, the commands that make it, and its fields each command gives otherwise
BESIDE: dict[type[rq.Request], tuple[tuple[str, ...], set[str]]] = {
    rq.CanaryRequest: (("activate", "update"), {"build"}),
    rrq.RepairRequest: (("verify",), set()),
}
GLOBAL = {"help", "config", "home", "json", "quiet", "debug"}


def commands(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Every (command words, parser) of the whole tree."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from commands(sub, (*path, name))


BUILT = [
    (path, p) for path, p in commands(build_parser()) if p.get_default("request_type") is not None
]


def test_every_request_is_some_command() -> None:
    made = {p.get_default("request_type") for _, p in BUILT} | set(BESIDE)
    declared = {
        c
        for module in (rq, rrq)
        for c in vars(module).values()
        if inspect.isclass(c) and issubclass(c, rq.Request) and c is not rq.Request
    }
    assert declared == made, declared ^ made


# a value the command's own type takes (--kind knows the kinds), one of the choices, or
# two tags bisect tells apart
SAMPLE = {"kind": "llama", "action": "status", "good": "b1", "bad": "b2"}


def line(
    path: tuple[str, ...],
    cls: type[rq.Request],
    given: dict[str, Any],
    values: dict[str, str] | None = None,
) -> list[str]:
    """The shortest command line: the required operands and options, each a plain value,
    and ``values`` (a field's text; the operands before it are given too)."""
    values = values or {}
    words = list(path)
    fields = [(n, a) for n, a in rq.args_of(cls) if n not in given]
    last = max([i for i, (n, a) in enumerate(fields) if a.positional and n in values] or [-1])
    for i, (name, arg) in enumerate(fields):
        needed = default_of(cls, name) is dataclasses.MISSING
        if name not in values and not needed and not (arg.positional and i < last):
            continue
        plain = "k=v" if kind_of(cls, name) is dict else SAMPLE.get(name, "x")
        value = values.get(name, plain)
        words += [value] if arg.positional else [arg.flag or f"--{name.replace('_', '-')}", value]
    return words


def refusal(argv: list[str]) -> str:
    with pytest.raises(UsageError) as err:
        build_parser(argv).parse_args(argv)
    return err.value.message


@pytest.mark.parametrize("built", BUILT, ids=[" ".join(path) for path, _ in BUILT])
def test_the_options_are_the_request(
    built: tuple[tuple[str, ...], argparse.ArgumentParser], capsys: pytest.CaptureFixture[str]
) -> None:
    path, parser = built
    cls: type[rq.Request] = parser.get_default("request_type")
    fields = dict(rq.args_of(cls))
    actions = {a.dest: a for a in parser._actions if a.dest not in GLOBAL}
    given = {n: v for n, v in parser._defaults.items() if n in fields and n not in actions}
    extras = set(actions) - set(fields)
    assert extras == EXTRAS.get(path[0], set()), f"options without a field: {extras}"
    for name, arg in fields.items():
        if name in given:
            continue
        if not arg.cli:  # a Python caller's option (releases' platform): none on the CLI
            assert name not in actions and f"--{name}" not in parser.format_help(), name
            continue
        action = actions[name]  # every field has its option or operand
        assert (not action.option_strings) == arg.positional, name
        if action.option_strings:
            assert action.option_strings == [arg.flag or f"--{name.replace('_', '-')}"]
        # the field's help, its default written in (argparse would write 5.0 for 5.0)
        assert action.help == arg.text(default_of(cls, name)).replace("%", "%%"), name

    # the defaults: a minimal command line makes the request with the class's own defaults
    argv = line(path, cls, given)
    request = build_parser(argv).parse_args(argv).request
    assert isinstance(request, cls)
    for name in fields:
        default = default_of(cls, name)
        if default is not dataclasses.MISSING and name not in given:
            assert getattr(request, name) == default, (name, argv)

    # the limits: the CLI refuses what the request (and so the API) refuses, in its words
    for name, arg in fields.items():
        if name in given or (arg.bounds is None and arg.high is None):
            continue
        flag = actions[name].option_strings[:1] if arg.cli else []
        if arg.bounds is not None:
            b = arg.bounds
            values: list[float] = [b.low if b.above else b.low - 1, b.high + 1]
            texts = [f"{v:g}" for v in values]
        else:
            assert arg.high is not None
            texts = ["x" * (arg.high + 1)]
            values = []
        for i, text in enumerate(texts):
            value: Any = values[i] if values else text
            if kind_of(cls, name) is list:
                value, text = [text] * (arg.high or 0) + [text], None
            elif kind_of(cls, name) is dict:
                value = {f"k{n}": "v" for n in range((arg.high or 0) + 1)}
            problem = arg.problem(value)
            assert problem is not None, (name, value)
            others = {n: getattr(request, n) for n in fields if n != name}
            with pytest.raises(InvalidInput) as err:
                cls(**others, **{name: value})
            assert str(err.value) == f"{name}: {problem}"
            with pytest.raises(InvalidInput) as api:
                adapter(cls).validate_python({**others, name: value})
            assert str(api.value) == f"{name}: {problem}"
            if text is None or kind_of(cls, name) is dict or not arg.cli:
                continue  # a list's size: the request's words (checked above)
            said = refusal(line(path, cls, given, {name: text}))
            shown = flag[0] if flag else (arg.metavar or name)
            assert said.startswith(f"argument {shown}: {problem}"), said
    capsys.readouterr()


@pytest.mark.parametrize("cls", list(BESIDE), ids=[c.__name__ for c in BESIDE])
def test_a_second_request_has_its_options_too(cls: type[rq.Request]) -> None:
    """Each field of a request a flag makes (``--canary``, ``--repair``) is an option of the
    commands that make it, with the field's default and help (the request checks the rest)."""
    names, given = BESIDE[cls]
    parsers = {path[0]: p for path, p in commands(build_parser()) if len(path) == 1}
    for name in names:
        actions = {a.dest: a for a in parsers[name]._actions}
        for field_name, arg in rq.args_of(cls):
            if field_name in given:
                continue
            dest = "canary" if (cls, field_name) == (rq.CanaryRequest, "models") else field_name
            action = actions[dest]
            default = default_of(cls, field_name)
            if default is not dataclasses.MISSING and action.option_strings and dest == field_name:
                if cls is rq.CanaryRequest and not isinstance(default, bool):
                    # left None when not given (refused without --canary); the help says the
                    # default the request then applies
                    assert action.default is None, (name, field_name)
                    assert action.help == arg.text(default).replace("%", "%%")
                else:
                    assert action.default == default, (name, field_name)
            assert action.help is not None and action.help.startswith(arg.text()[:20])


def given_by(parser: argparse.ArgumentParser, cls: type[rq.Request]) -> dict[str, Any]:
    """The fields the command itself sets (``add`` of ``models add-dir``), not the user."""
    actions = {a.dest for a in parser._actions}
    fields = dict(rq.args_of(cls))
    return {n: v for n, v in parser._defaults.items() if n in fields and n not in actions}


def numbers_and_choices() -> Iterator[Any]:
    """Every (command, field) whose option or operand is a number or one of some choices."""
    for path, parser in BUILT:
        cls: type[rq.Request] = parser.get_default("request_type")
        given = given_by(parser, cls)
        for name, arg in rq.args_of(cls):
            if name not in given and (kind_of(cls, name) in (int, float) or arg.choices):
                yield pytest.param(path, cls, given, name, id=f"{' '.join(path)} {name}")


@pytest.mark.parametrize(("path", "cls", "given", "name"), list(numbers_and_choices()))
def test_a_number_is_a_number_and_a_near_choice_is_named(
    path: tuple[str, ...],
    cls: type[rq.Request],
    given: dict[str, Any],
    name: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A number without bounds of its own (bisect's --threshold) reaches the request as a
    number, never its text (a TypeError, exit 1, before); a word that is not a number, or a
    near miss of a choice, is one usage line naming the option (and the nearest choice)."""
    arg = dict(rq.args_of(cls))[name]
    if arg.choices:
        near = arg.choices[-1][:-1]  # "uninstal", "start": did-you-mean names the choice
        said = refusal(line(path, cls, given, {name: near}))
        assert "invalid choice" in said and f"did you mean {arg.choices[-1]}" in said, said
    else:
        argv = line(path, cls, given, {name: "1"})
        value = getattr(build_parser(argv).parse_args(argv).request, name)
        assert isinstance(value, int | float) and value == 1, (argv, value)
        said = refusal(line(path, cls, given, {name: "abc"}))
        flag = arg.flag or "--" + name.replace("_", "-")
        assert said.startswith(f'argument {flag}: "abc" is not a'), said
    capsys.readouterr()


def test_help_writes_defaults_as_typed(capsys: pytest.CaptureFixture[str]) -> None:
    """Every generated --help fills in its defaults and bounds, a whole float without ".0"
    (``(5)``, as the README writes it), and never shows None or a placeholder."""
    for path, parser in BUILT:
        text = parser.format_help()
        for odd in ("%(", "{high}", "None", ".0)"):
            assert odd not in text, (path, odd)
    for command, said in [
        ("bench", "--prompt WORDS"),
        ("bench", "about a token each (256)"),
        ("activate", "new build may be (5)"),
        ("bisect", "by more than this (10)"),
        ("tune", "included (3600)"),
    ]:
        result = completed(run_in_process(command, "--help"), command, "--help")
        assert result.returncode == 0 and said in " ".join(result.stdout.split()), said
    capsys.readouterr()


@pytest.mark.parametrize("command", ["activate", "update"])
def test_canary_models_add_up_however_given(command: str) -> None:
    """``--canary a b`` and ``--canary a --canary b`` name both models (a second --canary
    replaced the first before), as bench's ``--build`` is given once per value."""
    operand = ["llama-server@b1-cpu"] if command == "activate" else []
    for argv in (
        [command, *operand, "--canary", "a", "b"],
        [command, *operand, "--canary", "a", "--canary", "b"],
    ):
        assert build_parser(argv).parse_args(argv).canary == ["a", "b"], argv


def test_a_refusal_of_the_request_names_the_option_as_typed() -> None:
    """What only the request checks (a list's size, a cross-field rule naming a field) is said
    in the command line's words, as argparse says its own: ``argument --build: …``, not the
    field's name (``builds: …``), and before anything runs (``--canary ""``)."""
    many = [w for i in range(101) for w in ("--build", f"b{i}")]
    assert refusal(["bench", "m", *many]).startswith(
        "argument --build: must have at most 100 items, not 101"
    )
    values = [f"k{i}=v" for i in range(21)]
    assert refusal(["set", "m", *values]).startswith("argument KEY=VALUE: must have at most 20")
    assert refusal(["uninstall", *map(str, range(101))]).startswith("argument BUILD: must")
    for argv in (["activate", "b@1-cpu", "--canary", ""], ["update", "--canary", ""]):
        assert refusal(argv).startswith("argument --canary: each model id must have"), argv
    assert refusal(["install", "llama-server", "b1\n"]).startswith(
        'argument version: release tag "b1\\n" holds control character'
    )


def test_a_switch_on_by_default_is_turned_off_by_its_no_flag() -> None:
    """A boolean whose default is true is given by a ``--no-…`` flag, one whose default is
    false by its plain name: a ``--generate`` that turned generation off would read wrong."""
    for path, parser in BUILT:
        cls: type[rq.Request] = parser.get_default("request_type")
        for name, arg in rq.args_of(cls):
            if kind_of(cls, name) is bool and arg.cli and name not in given_by(parser, cls):
                negative = (arg.flag or "").startswith("--no-")
                assert negative == (default_of(cls, name) is True), (path, name)
