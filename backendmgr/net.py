"""Network settings shared by the release listing and the downloader: API base, token,
offline switch, the download host allowlist, and the one place an httpx client is made."""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from ._version import __version__
from .errors import ConfigError, NetworkError
from .immutable import frozen

if TYPE_CHECKING:
    import httpx

__all__ = [
    "DEFAULT_API",
    "NetSettings",
    "check_url",
    "describe_network_failure",
    "get_bounded",
    "is_loopback",
    "make_client",
    "network_error",
    "open_following",
    "origin",
]

DEFAULT_API = "https://api.github.com"
USER_AGENT = f"backendmgr/{__version__}"
CONNECT_TIMEOUT = 15.0
READ_TIMEOUT = 30.0
# A small document's whole read (listing, index page) may take this many read timeouts: a
# server that drips one byte within each read timeout is still cut (5 min by default).
DOCUMENT_READS = 10
MAX_TOKEN_CHARS = 1024  # GitHub's tokens are 40 to ~100 characters
_DEFAULT_PORTS = {"http": 80, "https": 443}
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
# whatever follows "Bearer"/"token" in a library's message (h11 quotes a refused header value)
_SECRET = re.compile(r"(?i)\b(bearer|token)(\s+)\S+")


def is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def origin(url: str) -> tuple[str, str, int] | None:
    """``(scheme, host, port)`` with the default port filled in; None for a URL without one."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if not host or scheme not in _DEFAULT_PORTS:
        return None
    return scheme, host, port if port is not None else _DEFAULT_PORTS[scheme]


def check_url(url: str) -> None:
    """Refuse, before any socket is made, a URL without an http(s) scheme, a host and a port
    in range (the async stack would fail on it with a bare OverflowError)."""
    if origin(url) is None:
        raise NetworkError(
            f"refusing the URL {_printable(url)!r}: not an http(s) URL with a valid host and port"
        )


def _timeout_from_env(env: Mapping[str, str]) -> float:
    raw = env.get("BACKENDMGR_TIMEOUT", "").strip()
    if not raw:
        return READ_TIMEOUT
    try:
        value = float(raw)
    except ValueError:
        value = 0.0
    if not 0 < value <= 3600:
        raise ConfigError(f'BACKENDMGR_TIMEOUT "{raw[:40]}" is not a number of seconds (0-3600)')
    return value


def _token_from_env(env: Mapping[str, str]) -> str | None:
    """The GitHub token, checked once: surrounding whitespace (a CRLF token file) dropped, the
    rest printable ASCII without spaces and bounded, else one error that never shows it."""
    for name in ("GITHUB_TOKEN", "GH_TOKEN"):
        token = env.get(name, "").strip()
        if not token:
            continue
        if not (token.isascii() and token.isprintable()) or " " in token:
            raise ConfigError(f"{name} holds characters no token has (printable ASCII only)")
        if len(token) > MAX_TOKEN_CHARS:
            raise ConfigError(f"{name} is longer than {MAX_TOKEN_CHARS} characters: not a token")
        return token
    return None


def _api_from_env(env: Mapping[str, str]) -> str:
    api = (env.get("BACKENDMGR_GITHUB_API") or DEFAULT_API).rstrip("/")
    shown = _printable(api, 80)
    try:
        parts = urlsplit(api)
        _ = parts.port  # a port out of range or not a number raises here
    except ValueError as exc:
        raise ConfigError(f'BACKENDMGR_GITHUB_API "{shown}" is not a valid URL ({exc})') from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f'BACKENDMGR_GITHUB_API "{shown}" is not an http(s) URL')
    if parts.scheme == "http" and not is_loopback(parts.hostname):
        raise ConfigError(
            f'BACKENDMGR_GITHUB_API "{shown}" uses plain http, which is allowed only on loopback'
        )
    return api


@frozen(slots=True)
class NetSettings:
    api_base: str = DEFAULT_API
    token: str | None = None
    offline: bool = False
    read_timeout: float = READ_TIMEOUT

    @property
    def connect_timeout(self) -> float:
        return min(CONNECT_TIMEOUT, self.read_timeout)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> NetSettings:
        env = os.environ if environ is None else environ
        api = _api_from_env(env)
        token = _token_from_env(env)
        offline = env.get("BACKENDMGR_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")
        return cls(api_base=api, token=token, offline=offline, read_timeout=_timeout_from_env(env))

    @property
    def document_deadline(self) -> float:
        """The whole of one small document's read, redirects included."""
        return DOCUMENT_READS * self.read_timeout

    @property
    def api_host(self) -> str:
        return (urlsplit(self.api_base).hostname or "").lower()

    def auth_headers(self, url: str) -> dict[str, str]:
        """The token, only for the API's exact origin: scheme, host and port (a redirect to
        another port or to plain http gets nothing)."""
        if self.token and origin(url) is not None and origin(url) == origin(self.api_base):
            return {"Authorization": f"Bearer {self.token}"}
        return {}

    def check_download_url(self, url: str) -> None:
        """Refuse a URL (first or after a redirect) outside the allowlist (SPEC §7.1)."""
        check_url(url)
        parts = urlsplit(url)
        host = (parts.hostname or "").lower()
        allowed = (
            host in ("github.com", self.api_host)
            or host.endswith(".github.com")
            or host.endswith(".githubusercontent.com")
        )
        if not allowed:
            raise NetworkError(f"refusing to download from {host or url}: not an allowed host")
        if parts.scheme == "https":
            return
        if parts.scheme == "http" and host == self.api_host and is_loopback(host):
            return
        raise NetworkError(f"refusing {parts.scheme or 'unknown'}:// URL {url}: https is required")

    def require_online(self, what: str) -> None:
        if self.offline:
            raise NetworkError(f"{what} needs the network, but BACKENDMGR_OFFLINE is set")


def make_client(net: NetSettings | None = None) -> httpx.AsyncClient:
    import httpx

    net = net or NetSettings.from_env()
    wait = net.read_timeout
    return httpx.AsyncClient(
        timeout=httpx.Timeout(connect=net.connect_timeout, read=wait, write=wait, pool=wait),
        headers={"User-Agent": USER_AGENT},
        follow_redirects=False,
        transport=_transport_per_scheme(),
    )


def _transport_per_scheme() -> httpx.AsyncBaseTransport:
    """httpx's own transport, one per URL scheme, each made at its scheme's first request.

    Making the https transport loads the CA bundle into a TLS context (0.1-0.4 s here): an
    install from a loopback mirror over plain http, or one whose listing is cached until the
    download, should not wait for it before its first byte. The plain-http transport gets a
    context that trusts no certificate at all: it never makes a TLS connection."""
    import ssl

    import httpx

    from ._wide_reads import wide_reads

    class PerScheme(httpx.AsyncBaseTransport):
        def __init__(self) -> None:
            self._made: dict[str, httpx.AsyncHTTPTransport] = {}

        def _for(self, scheme: str) -> httpx.AsyncHTTPTransport:
            made = self._made.get(scheme)
            if made is None:
                if scheme == "https":
                    made = wide_reads(httpx.AsyncHTTPTransport())
                else:
                    made = wide_reads(
                        httpx.AsyncHTTPTransport(verify=ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT))
                    )
                self._made[scheme] = made
            return made

        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            return await self._for(request.url.scheme).handle_async_request(request)

        async def aclose(self) -> None:
            for made in self._made.values():
                await made.aclose()

    return PerScheme()


def _where(url: str) -> str:
    try:
        where = urlsplit(url).netloc
    except ValueError:
        where = ""
    return _printable(where or url, 80)


def _printable(text: str, limit: int = 200) -> str:
    text = _CONTROL.sub("?", text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _seconds(value: float | None) -> str:
    return "?" if value is None else f"{value:g} s"


def describe_network_failure(exc: BaseException, url: str, net: NetSettings) -> str:
    """One line for any httpx (or h11, via httpx) failure: what happened, where, in which phase;
    never empty (the exception's class names it when the library gives no text)."""
    import httpx

    where = _where(url)
    reason = _redacted(str(exc).strip() or type(exc).__name__, net)
    if isinstance(exc, httpx.ConnectTimeout):
        return (
            f"{where} did not accept a connection within "
            f"{_seconds(net.connect_timeout)} (connect timeout)"
        )
    if isinstance(exc, httpx.ReadTimeout):
        return f"{where} did not answer within {_seconds(net.read_timeout)} (read timeout)"
    if isinstance(exc, httpx.WriteTimeout):
        return (
            f"{where} did not take the request within {_seconds(net.read_timeout)} (write timeout)"
        )
    if isinstance(exc, httpx.PoolTimeout):
        return (
            f"no connection to {where} was free within {_seconds(net.read_timeout)} (pool timeout)"
        )
    if isinstance(exc, httpx.ConnectError):
        return f"cannot reach {where}: {reason}{_way_out(url, net)}"
    if isinstance(exc, httpx.RemoteProtocolError):
        return f"{where} broke the HTTP protocol: {reason}"
    if isinstance(exc, httpx.DecodingError):
        return f"{where} sent a body that cannot be decoded: {reason}"
    if isinstance(exc, httpx.TooManyRedirects):
        return f"too many redirects at {where}"
    if isinstance(exc, (httpx.InvalidURL, httpx.UnsupportedProtocol)):
        return f"refusing the URL {_printable(url)!r}: {reason}"
    return f"{where}: {type(exc).__name__}: {reason}"


def _redacted(text: str, net: NetSettings) -> str:
    """A library's message without the token: h11 quotes a header value it refuses."""
    if net.token:
        text = text.replace(net.token, "[redacted]")
    return _printable(_SECRET.sub(r"\1\2[redacted]", text))


def _way_out(url: str, net: NetSettings) -> str:
    """What to do when the release API cannot be reached: a mirror, or the cache alone."""
    if urlsplit(url).hostname != urlsplit(net.api_base).hostname:
        return ""
    if net.api_base != DEFAULT_API:
        return "; is the mirror BACKENDMGR_GITHUB_API names running there (scripts/mirror.py DIR)?"
    return (
        "; without GitHub here, serve releases from a folder (scripts/demo --keep DIR, or "
        "backendmgr fetch DIR where GitHub is reachable) with scripts/mirror.py DIR and set "
        "BACKENDMGR_GITHUB_API to its address, or set BACKENDMGR_OFFLINE=1 for cached listings"
    )


def network_error(exc: BaseException, url: str, net: NetSettings) -> NetworkError:
    """The one mapping from library errors to :class:`NetworkError` (listing, package index
    and downloader)."""
    return NetworkError(describe_network_failure(exc, url, net))


MAX_REDIRECTS = 5


async def open_following(
    client: httpx.AsyncClient,
    net: NetSettings,
    url: str,
    headers: Mapping[str, str],
    *,
    check: Callable[[str], None] = check_url,
    token: bool = True,
    hops: int = MAX_REDIRECTS,
) -> tuple[httpx.Response, str]:
    """Send a GET and follow redirects by hand, ``check`` refusing a hop before any socket is
    made (the token, with ``token``, only to the API's exact origin): the streaming response
    and the URL it came from. A Location that is no http(s) URL (``data:``, ``javascript:``,
    which httpx cannot even parse) is one :class:`NetworkError`; transport errors are left to
    the caller (the downloader retries them)."""
    import httpx

    for _ in range(hops):
        check(url)
        send = {**headers, **(net.auth_headers(url) if token else {})}
        try:
            request = client.build_request("GET", url, headers=send)
        except httpx.InvalidURL as exc:
            raise network_error(exc, url, net) from exc
        try:
            response = await client.send(request, stream=True)
        except httpx.InvalidURL as exc:
            where = _where(url)
            raise NetworkError(
                f"{where} redirected to a URL that is not http(s); refusing it"
            ) from exc
        if not (response.is_redirect and "location" in response.headers):
            return response, url
        await response.aclose()
        try:
            url = str(httpx.URL(url).join(response.headers["location"]))
        except httpx.InvalidURL as exc:
            raise network_error(exc, url, net) from exc
    raise NetworkError(f"too many redirects for {_printable(url)}")


async def get_bounded(
    client: httpx.AsyncClient,
    net: NetSettings,
    url: str,
    headers: Mapping[str, str],
    *,
    max_bytes: int,
    what: str,
    token: bool = True,
) -> httpx.Response:
    """GET a small document (a release listing, a package index page), its body read up to
    ``max_bytes``, through :func:`open_following`, all within :attr:`NetSettings.document_deadline`
    (each read's timeout alone lets a server drip bytes for ever). Every failure is one
    :class:`NetworkError` line naming ``what``."""
    import anyio
    import httpx

    try:
        with anyio.fail_after(net.document_deadline):
            response, url = await open_following(client, net, url, headers, token=token)
            try:
                body = bytearray()
                async for chunk in response.aiter_bytes():
                    body += chunk
                    if len(body) > max_bytes:
                        raise NetworkError(
                            f"{what} sent more than {max_bytes >> 20} MiB for one request; "
                            "refusing it"
                        )
            finally:
                await response.aclose()
    except (httpx.HTTPError, httpx.InvalidURL, httpx.StreamError) as exc:
        raise network_error(exc, url, net) from exc
    except TimeoutError:
        raise NetworkError(
            f"{_where(url)} did not finish its answer within "
            f"{_seconds(net.document_deadline)} (whole-read deadline)"
        ) from None
    # the body is already decoded: drop the headers that describe the wire form
    kept = [
        (k, v)
        for k, v in response.headers.multi_items()
        if k.lower() not in ("content-encoding", "content-length", "transfer-encoding")
    ]
    return httpx.Response(
        response.status_code, headers=kept, content=bytes(body), request=response.request
    )
