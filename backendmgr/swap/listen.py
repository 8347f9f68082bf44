"""The address llama-swap listens on: accepted only as llama-swap (Go's listener) would bind
it as asked, and the URL this machine reaches it at. Pure but for the interface list."""

from __future__ import annotations

import ipaddress
import socket

from ..errors import UsageError, escaped
from . import DEFAULT_LISTEN  # llama-swap's own port, on loopback

__all__ = ["DEFAULT_LISTEN", "parse_listen", "reach_url", "split_host_port"]


def split_host_port(text: str) -> tuple[str, str]:
    """``HOST:PORT`` split exactly as Go's ``net.SplitHostPort`` does (llama-swap hands its
    ``-listen`` to Go's listener): the port follows the last colon; a host holding a colon
    must be bracketed, and brackets appear nowhere else. Raises :class:`ValueError`."""
    i = text.rfind(":")
    if i < 0:
        raise ValueError("missing port in address")
    j = k = 0
    if text.startswith("["):
        end = text.find("]")
        if end < 0:
            raise ValueError("missing ']' in address")
        if end + 1 == len(text):
            raise ValueError("missing port in address")
        if end + 1 != i:
            raise ValueError(
                "too many colons in address" if text[end + 1] == ":" else "missing port in address"
            )
        host = text[1:end]
        j, k = 1, end + 1
    else:
        host = text[:i]
        if ":" in host:
            raise ValueError("too many colons in address")
    if "[" in text[j:]:
        raise ValueError("unexpected '[' in address")
    if "]" in text[k:]:
        raise ValueError("unexpected ']' in address")
    return host, text[i + 1 :]


def _zone_ok(zone: str) -> bool:
    """An IPv6 zone llama-swap can bind: an interface of this machine, by name or index
    (Go silently drops a zone it cannot resolve, so the listener would not be the one asked)."""
    if zone.isascii() and zone.isdigit():
        return 0 < int(zone) < 1 << 32 and any(i == int(zone) for i, _ in _interfaces())
    return any(name == zone for _, name in _interfaces()) if zone.isprintable() else False


def _interfaces() -> list[tuple[int, str]]:
    try:
        return socket.if_nameindex()
    except OSError:
        return []


def parse_listen(text: str) -> tuple[str, int, bool]:
    """``HOST:PORT`` → (host, port, loopback), accepting only what llama-swap binds as asked:
    Go's host/port split, a port of ASCII digits 1-65535 (no sign, no service name), a host
    that is an IP address (an IPv6 one bracketed, with a zone naming an interface here) or
    localhost. An empty host means every address. Refused: :class:`UsageError` (exit 2)."""

    def refuse(why: str) -> UsageError:
        return UsageError(
            f'"{escaped(text, 100)}" is not a listen address ({why}); use HOST:PORT, '
            f"e.g. {DEFAULT_LISTEN}"
        )

    try:
        host, port_text = split_host_port(text)
    except ValueError as exc:
        raise refuse(str(exc)) from None
    if not (port_text.isascii() and port_text.isdigit()) or not 0 < int(port_text) < 65536:
        raise refuse("the port must be a number from 1 to 65535, in ASCII digits")
    port = int(port_text)
    bracketed = text.startswith("[")
    if host == "localhost":
        return host, port, True
    if not host:
        return host, port, False
    bare, _, zone = host.partition("%") if bracketed else (host, "", "")
    if bracketed and "%" in host and (not zone or not _zone_ok(zone)):
        raise refuse(f'"{escaped(zone, 40)}" is not a network interface of this machine')
    try:
        address = ipaddress.ip_address(bare)
    except ValueError:
        raise refuse(
            f'the host must be an IP address or localhost, not "{escaped(bare, 60)}"'
        ) from None
    if isinstance(address, ipaddress.IPv6Address) and not bracketed:
        raise refuse("an IPv6 address goes in brackets: [ADDR]:PORT")
    if zone and not isinstance(address, ipaddress.IPv6Address):
        raise refuse("only an IPv6 address takes a zone")
    return host, port, address.is_loopback


def reach_url(host: str, port: int) -> str:
    """The URL this machine reaches the listener at (every-address binds via loopback; a
    zone is written as a URL writes it, ``%25``)."""
    bare = host[1:-1] if host.startswith("[") else host
    if not bare or bare in ("0.0.0.0", "::"):
        bare = "127.0.0.1"
    shown = f"[{bare.replace('%', '%25')}]" if ":" in bare else bare
    return f"http://{shown}:{port}"
