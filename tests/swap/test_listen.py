"""Listen addresses for ``up`` and the service: loopback unless said otherwise."""

from __future__ import annotations

import pytest

from backendmgr.errors import InvalidInput, UsageError
from backendmgr.swap.listen import parse_listen, reach_url, split_host_port


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
        ("[127.0.0.1]:8080", True, "http://127.0.0.1:8080"),  # Go takes brackets round IPv4
        ("[::1%lo]:8080", True, "http://[::1%25lo]:8080"),  # a zone naming an interface here
        ("127.0.0.1:08080", True, "http://127.0.0.1:8080"),
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


@pytest.mark.parametrize(
    "text",
    [
        "127.0.0.1:\u0661\u0668\u0669\u0664\u0660",  # Arabic-Indic digits: Go wants ASCII
        "127.0.0.1:\uff18\uff10",  # fullwidth digits
        "127.0.0.1:+80",  # Go takes a sign; backendmgr wants the plain number
        "127.0.0.1:http",  # Go looks a service name up; backendmgr wants the number
        '[::1%x y"z]:18931',  # no such interface: Go would drop the zone silently
        "[::1%]:80",
        "[127.0.0.1%lo]:80",  # a zone on IPv4
        "::1:8080",  # an IPv6 host needs brackets
        "[::1]:80:80",
        "[::1]x:80",
        "[::1:80",
        "a[b]:80",
        " 127.0.0.1:80",
    ],
)
def test_what_llama_swap_cannot_bind_is_a_usage_error(text: str) -> None:
    with pytest.raises(UsageError, match="is not a listen address"):
        parse_listen(text)


@pytest.mark.parametrize(
    ("text", "split"),
    [
        ("h:1", ("h", "1")),
        (":1", ("", "1")),
        ("[::1]:80", ("::1", "80")),
        ("[::1%eth0]:80", ("::1%eth0", "80")),
        ("h:", ("h", "")),
    ],
)
def test_split_as_go_does(text: str, split: tuple[str, str]) -> None:
    assert split_host_port(text) == split


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("h", "missing port in address"),
        ("[::1]", "missing port in address"),
        ("[::1", "missing ']' in address"),
        ("::1:80", "too many colons in address"),
        ("[::1]:80:1", "too many colons in address"),
        ("[a]b:80", "missing port in address"),
        ("a]:80", "unexpected ']' in address"),
        ("a[:80", "unexpected '[' in address"),
    ],
)
def test_split_refuses_as_go_does(text: str, why: str) -> None:
    with pytest.raises(ValueError, match=why.replace("[", "\\[").replace("]", "\\]")):
        split_host_port(text)
