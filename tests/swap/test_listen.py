"""Listen addresses for ``up`` and the service: loopback unless said otherwise."""

from __future__ import annotations

import pytest

from backendmgr.errors import InvalidInput
from backendmgr.manager.swap import parse_listen, reach_url


@pytest.mark.parametrize(
    ("text", "loopback", "url"),
    [
        ("127.0.0.1:8080", True, "http://127.0.0.1:8080"),
        ("127.0.0.2:9000", True, "http://127.0.0.2:9000"),
        ("localhost:8080", True, "http://localhost:8080"),
        ("[::1]:8080", True, "http://[::1]:8080"),
        ("0.0.0.0:8080", False, "http://127.0.0.1:8080"),
        (":8080", False, "http://127.0.0.1:8080"),
        ("[::]:8080", False, "http://127.0.0.1:8080"),
        ("192.168.1.5:8080", False, "http://192.168.1.5:8080"),
    ],
)
def test_listen_addresses(text: str, loopback: bool, url: str) -> None:
    host, port, is_loopback = parse_listen(text)
    assert is_loopback is loopback
    assert reach_url(host, port) == url


@pytest.mark.parametrize(
    "text", ["8080", "127.0.0.1", "127.0.0.1:0", "127.0.0.1:65536", "example.com:80", "a b:1"]
)
def test_bad_listen_addresses_are_refused(text: str) -> None:
    with pytest.raises(InvalidInput):
        parse_listen(text)
