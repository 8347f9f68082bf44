"""The network settings from the environment: a token is checked once and never shown, a bad
API address is one line naming its variable (hostile pass 3: D9, D14)."""

from __future__ import annotations

from pathlib import Path

import anyio
import httpx
import pytest

from backendmgr.errors import ConfigError, NetworkError
from backendmgr.mirror import MirrorServer
from backendmgr.net import NetSettings, describe_network_failure, get_bounded, make_client
from tests.support import publish_llama
from tests.support.cli import Cli, CliResult, error_line

SECRET = "ghp_S3CRETVALUE123"


def one_line_error(result: CliResult) -> str:
    """The one error line, last, and no internal error."""
    line = error_line(result)
    assert "internal error" not in line and result.err.rstrip().endswith(line), result.err
    assert SECRET not in result.err + result.out
    return line


# --- D14: the token ---------------------------------------------------------------------------


@pytest.mark.parametrize("padded", [f"{SECRET}\r", f"{SECRET}\r\n", f"  {SECRET}\n"])
def test_token_from_a_crlf_file_is_sent_without_the_whitespace(
    cli: Cli, mirror: MirrorServer, mirror_root: Path, monkeypatch: pytest.MonkeyPatch, padded: str
) -> None:
    publish_llama(mirror_root, "b100")
    monkeypatch.setenv("GITHUB_TOKEN", padded)
    result = cli("releases", "llama-server", "--refresh")
    assert result.code == 0, result
    sent = {h.get("Authorization") for p, h in mirror.requests if p.startswith("/repos/")}
    assert sent == {f"Bearer {SECRET}"}


@pytest.mark.parametrize(
    ("variable", "value", "why"),
    [
        ("GITHUB_TOKEN", f"{SECRET}é", "printable ASCII only"),
        ("GITHUB_TOKEN", f"{SECRET}\rx", "printable ASCII only"),
        ("GITHUB_TOKEN", f"{SECRET} x", "printable ASCII only"),
        ("GH_TOKEN", f"{SECRET}\x1b[0m", "printable ASCII only"),
        ("GITHUB_TOKEN", SECRET * 100, "longer than 1024 characters"),
    ],
)
def test_bad_token_is_one_line_naming_the_variable_not_the_value(
    cli: Cli,
    mirror: MirrorServer,
    monkeypatch: pytest.MonkeyPatch,
    variable: str,
    value: str,
    why: str,
) -> None:
    monkeypatch.setenv(variable, value)
    line = one_line_error(cli("releases", "llama-server", "--refresh"))
    assert line.startswith(f"error: {variable} ") and why in line
    assert mirror.requests == []  # refused before any request


def test_blank_token_counts_as_none() -> None:
    assert NetSettings.from_env({"GITHUB_TOKEN": " \r\n"}).token is None
    assert NetSettings.from_env({"GITHUB_TOKEN": "", "GH_TOKEN": f"{SECRET}\n"}).token == SECRET


def test_a_refused_header_never_echoes_the_token(mirror: MirrorServer) -> None:
    """Belt and braces: a token that slipped past the check (API users build NetSettings
    themselves) is refused by the HTTP library, whose message quotes the header."""
    net = NetSettings(api_base=mirror.base_url, token=f"{SECRET}\r")

    async def get() -> None:
        async with make_client(net) as client:
            await get_bounded(
                client,
                net,
                f"{mirror.base_url}/repos/a/b/releases",
                {},
                max_bytes=1 << 20,
                what="x",
            )

    with pytest.raises(NetworkError) as caught:
        anyio.run(get)
    assert SECRET not in str(caught.value)
    assert "Bearer [redacted]" in str(caught.value)


def test_describe_redacts_the_token_wherever_it_appears() -> None:
    net = NetSettings(token=SECRET)
    for text in (f"value {SECRET!r} refused", f"Illegal header value b'Bearer {SECRET}x\\r'"):
        told = describe_network_failure(httpx.LocalProtocolError(text), "http://127.0.0.1:1/", net)
        assert SECRET not in told and "[redacted]" in told, told


# --- D9: the API address ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("http://[::1", "is not a valid URL (Invalid IPv6 URL)"),
        ("http://127.0.0.1:99999", "is not a valid URL"),
        ("http://127.0.0.1:port", "is not a valid URL"),
        ("ftp://127.0.0.1", "is not an http(s) URL"),
    ],
)
def test_bad_api_address_is_one_line_even_offline(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, value: str, why: str
) -> None:
    monkeypatch.setenv("BACKENDMGR_GITHUB_API", value)
    line = one_line_error(cli("releases", "llama-server"))
    assert line.startswith(f'error: BACKENDMGR_GITHUB_API "{value}" ') and why in line


def test_bad_api_address_raises_config_error() -> None:
    with pytest.raises(ConfigError, match="BACKENDMGR_GITHUB_API"):
        NetSettings.from_env({"BACKENDMGR_GITHUB_API": "https://[::1/x"})
