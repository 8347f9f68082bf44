"""One limit per parameter: the CLI's argparse types and the requests the API and the Manager
take refuse the same values with the same words (backendmgr.limits declares each once)."""

from __future__ import annotations

from typing import Any

import pytest

from backendmgr.cli.parser import UsageError, build_parser
from backendmgr.errors import InvalidInput
from backendmgr.limits import PRUNE_KEEP, RELEASES_LIMIT, VERIFY_TIMEOUT_S, Bounds
from backendmgr.requests import InstallRequest, PruneRequest, ReleasesQuery, Request, VerifyRequest

# (argv before the value, option, request, its other fields, field, bounds, refused, allowed)
CASES: list[tuple[list[str], str, type[Request], dict[str, Any], str, Bounds, list[str], list[str]]]
CASES = [
    (
        ["releases", "llama-server"],
        "--limit",
        ReleasesQuery,
        {"component": "llama-server"},
        "limit",
        RELEASES_LIMIT,
        ["0", "-1", "101"],
        ["1", "100"],
    ),
    (["prune"], "--keep", PruneRequest, {}, "keep", PRUNE_KEEP, ["-1", "1001"], ["0", "1000"]),
    (
        ["verify"],
        "--timeout",
        VerifyRequest,
        {},
        "timeout",
        VERIFY_TIMEOUT_S,
        ["0", "-3", "86401", "nan"],
        ["0.5", "86400"],
    ),
]


def cli_refusal(argv: list[str]) -> str | None:
    try:
        build_parser().parse_args(argv)
    except UsageError as exc:
        return exc.message
    return None


@pytest.mark.parametrize("case", CASES, ids=[c[1] for c in CASES])
def test_cli_and_requests_share_each_limit(
    case: tuple[list[str], str, type[Request], dict[str, Any], str, Bounds, list[str], list[str]],
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv, option, model, others, field, bounds, refused, allowed = case
    for text in refused:
        problem = bounds.problem(float(text))
        assert problem is not None, text
        said = cli_refusal([*argv, f"{option}={text}"])
        assert said is not None and said.startswith(f"argument {option}: {problem}"), said
        with pytest.raises(InvalidInput) as err:
            model(**others, **{field: float(text) if "." in text or "n" in text else int(text)})
        assert str(err.value) == f"{field}: {problem}"
    for text in allowed:
        assert cli_refusal([*argv, f"{option}={text}"]) is None
        model(**others, **{field: float(text)})
    capsys.readouterr()


def test_the_api_refuses_unknown_fields() -> None:
    """A misspelt key in an API body is refused, not ignored (the CLI's argparse refuses its
    misspelt options)."""
    from pydantic import ValidationError

    from backendmgr.errors import validation_problem
    from backendmgr.web.http import adapter

    with pytest.raises(ValidationError) as err:
        adapter(InstallRequest).validate_python({"component": "llama-server", "smoke_test": 0})
    said = validation_problem(err.value).input_line()
    assert said == "smoke_test: extra inputs are not permitted"


def test_the_json_schema_states_the_bounds() -> None:
    from backendmgr.web.http import adapter

    schema = adapter(ReleasesQuery).json_schema()["properties"]["limit"]
    assert (schema["minimum"], schema["maximum"]) == (1, 100)
    timeout = adapter(VerifyRequest).json_schema()["properties"]["timeout"]["anyOf"][0]
    assert (timeout["exclusiveMinimum"], timeout["maximum"]) == (0, 86400)


def test_a_cross_field_rule_says_the_same_words_everywhere() -> None:
    """``--platform`` without ``--dry-run``: one rule, in the request; the CLI's usage error
    and the API's 422 are its words."""
    rule = "--platform describes another machine; use it with --dry-run"
    with pytest.raises(InvalidInput) as err:
        InstallRequest(component="llama-server", platform="linux-x86_64")
    assert str(err.value) == rule
    said = cli_refusal(["install", "llama-server", "--platform", "linux-x86_64"])
    assert said is not None and said.startswith(rule)
    assert InstallRequest(component="llama-server", platform="linux-x86_64", dry_run=True)


def test_the_cli_path_does_not_import_pydantic() -> None:
    """Building a request from a command line needs only the standard library."""
    import subprocess
    import sys

    code = (
        "import sys; from backendmgr.cli.parser import build_parser; "
        "a = build_parser(['prune']).parse_args(['prune', '--keep', '2']); "
        "assert a.request.keep == 2; print('pydantic' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
