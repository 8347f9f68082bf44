"""Network settings shared by the release listing and the downloader: API base, token,
offline switch, the download host allowlist, and the one place an httpx client is made."""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from ._version import __version__
from .errors import InvalidInput, NetworkError

if TYPE_CHECKING:
    import httpx

__all__ = ["DEFAULT_API", "NetSettings", "is_loopback", "make_client"]

DEFAULT_API = "https://api.github.com"
USER_AGENT = f"backendmgr/{__version__}"


def is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True, slots=True)
class NetSettings:
    api_base: str = DEFAULT_API
    token: str | None = None
    offline: bool = False

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> NetSettings:
        env = os.environ if environ is None else environ
        api = (env.get("BACKENDMGR_GITHUB_API") or DEFAULT_API).rstrip("/")
        parts = urlsplit(api)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise InvalidInput(f'BACKENDMGR_GITHUB_API "{api}" is not an http(s) URL')
        if parts.scheme == "http" and not is_loopback(parts.hostname):
            raise InvalidInput(
                f'BACKENDMGR_GITHUB_API "{api}" uses plain http, which is allowed only on loopback'
            )
        token = env.get("GITHUB_TOKEN") or env.get("GH_TOKEN") or None
        offline = env.get("BACKENDMGR_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")
        return cls(api_base=api, token=token, offline=offline)

    @property
    def api_host(self) -> str:
        return (urlsplit(self.api_base).hostname or "").lower()

    def check_download_url(self, url: str) -> None:
        """Refuse a URL (first or after a redirect) outside the allowlist (SPEC §7.1)."""
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


def make_client() -> httpx.AsyncClient:
    import httpx

    return httpx.AsyncClient(
        timeout=httpx.Timeout(connect=15.0, read=60.0, write=60.0, pool=60.0),
        headers={"User-Agent": USER_AGENT},
        follow_redirects=False,
    )
