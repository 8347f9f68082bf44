"""GitHub releases: listing with an ETag cache on disk, tag lookup, "latest" selection (§6)."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote, urljoin, urlsplit

import httpx

from .._fs import atomic_write_bytes, sanitize_segment
from ..errors import NetworkError, NotFound
from ..net import NetSettings
from .models import Release, ReleaseAsset, newest_releases_first

__all__ = ["CACHE_SECONDS", "GithubReleases", "validate_repo"]

CACHE_SECONDS = 600
_PART = re.compile(r"^[A-Za-z0-9_.-]+$")


def validate_repo(repo: str) -> str:
    owner, sep, name = repo.partition("/")
    if not sep or any(not _PART.match(p) or p in (".", "..") for p in (owner, name)):
        raise NotFound(f'"{repo}" is not a GitHub repository name (owner/name)')
    return repo


def _parse_release(data: dict[str, Any]) -> Release | None:
    if data.get("draft"):
        return None
    assets = tuple(
        ReleaseAsset(
            name=str(a.get("name", "")),
            url=str(a.get("browser_download_url", "")),
            size=a.get("size") if isinstance(a.get("size"), int) else None,
            digest=a.get("digest") if isinstance(a.get("digest"), str) else None,
        )
        for a in data.get("assets") or []
        if a.get("name") and a.get("browser_download_url")
    )
    published = data.get("published_at")
    return Release(
        tag=str(data.get("tag_name", "")),
        name=str(data.get("name") or ""),
        published_at=datetime.fromisoformat(published.replace("Z", "+00:00"))
        if isinstance(published, str) and published
        else None,
        prerelease=bool(data.get("prerelease")),
        assets=assets,
    )


class GithubReleases:
    """Release listings for one API base, with the token only on API requests."""

    def __init__(
        self,
        client: httpx.AsyncClient,
        net: NetSettings,
        cache_dir: Path,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.client = client
        self.net = net
        self.cache_dir = cache_dir
        self.clock = clock

    def _cache_file(self, repo: str) -> Path:
        host = sanitize_segment(self.net.api_host)
        return (
            self.cache_dir / "github" / host / (sanitize_segment(repo.replace("/", "__")) + ".json")
        )

    def _read_cache(self, repo: str) -> dict[str, Any] | None:
        try:
            data = json.loads(self._cache_file(repo).read_text())
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) and isinstance(data.get("releases"), list) else None

    def _write_cache(self, repo: str, etag: str | None, releases: list[Any]) -> None:
        payload = {"etag": etag, "fetched_at": self.clock(), "releases": releases}
        atomic_write_bytes(self._cache_file(repo), json.dumps(payload).encode())

    async def _get(self, url: str, headers: dict[str, str]) -> httpx.Response:
        """GET an API URL; the token goes only to the API host, never across a redirect."""
        api_host = self.net.api_host
        for _ in range(5):
            send = dict(headers)
            if self.net.token and (urlsplit(url).hostname or "").lower() == api_host:
                send["Authorization"] = f"Bearer {self.net.token}"
            try:
                response = await self.client.get(url, headers=send)
            except httpx.HTTPError as exc:
                raise NetworkError(f"cannot reach {urlsplit(url).netloc}: {exc!s}") from exc
            if response.is_redirect and "location" in response.headers:
                url = urljoin(url, response.headers["location"])
                continue
            return response
        raise NetworkError(f"too many redirects for {url}")

    def _raise_for(self, response: httpx.Response, repo: str) -> None:
        if (
            response.status_code in (403, 429)
            and response.headers.get("x-ratelimit-remaining") == "0"
        ):
            reset = response.headers.get("x-ratelimit-reset", "")
            when = "later"
            if reset.isdigit():
                when = datetime.fromtimestamp(int(reset)).astimezone().strftime("%H:%M %Z").strip()
            raise NetworkError(f"GitHub rate limit reached; resets at {when}; set GITHUB_TOKEN")
        if response.status_code == 404:
            raise NotFound(f"GitHub repository {repo} not found (HTTP 404)")
        raise NetworkError(
            f"GitHub API answered HTTP {response.status_code} for {repo}; try again later"
        )

    async def releases(self, repo: str, *, refresh: bool = False) -> list[Release]:
        """Newest first; served from the cache within 10 minutes, revalidated after."""
        validate_repo(repo)
        cached = self._read_cache(repo)
        fresh = (
            cached is not None and self.clock() - float(cached.get("fetched_at", 0)) < CACHE_SECONDS
        )
        if cached is not None and (self.net.offline or (fresh and not refresh)):
            return self._parsed(cached["releases"])
        if self.net.offline:
            raise NetworkError(f"no cached release list for {repo}, and BACKENDMGR_OFFLINE is set")
        headers = {"Accept": "application/vnd.github+json", "X-GitHub-Api-Version": "2022-11-28"}
        if cached is not None and cached.get("etag"):
            headers["If-None-Match"] = str(cached["etag"])
        response = await self._get(
            f"{self.net.api_base}/repos/{repo}/releases?per_page=100", headers
        )
        if response.status_code == 304 and cached is not None:
            self._write_cache(repo, cached.get("etag"), cached["releases"])
            return self._parsed(cached["releases"])
        if response.status_code != 200:
            self._raise_for(response, repo)
        try:
            body = response.json()
        except ValueError as exc:
            raise NetworkError(f"GitHub API sent invalid JSON for {repo}") from exc
        if not isinstance(body, list):
            raise NetworkError(f"GitHub API sent an unexpected document for {repo}")
        self._write_cache(repo, response.headers.get("etag"), body)
        return self._parsed(body)

    async def release_by_tag(self, repo: str, tag: str) -> Release:
        validate_repo(repo)
        self.net.require_online(f"looking up release {tag} of {repo}")
        headers = {"Accept": "application/vnd.github+json"}
        url = f"{self.net.api_base}/repos/{repo}/releases/tags/{quote(tag, safe='')}"
        response = await self._get(url, headers)
        if response.status_code == 404:
            raise NotFound(f"{repo} has no release {tag}")
        if response.status_code != 200:
            self._raise_for(response, repo)
        release = _parse_release(response.json())
        if release is None:
            raise NotFound(f"{repo} has no published release {tag}")
        return release

    @staticmethod
    def _parsed(raw: list[Any]) -> list[Release]:
        releases = [r for r in (_parse_release(d) for d in raw if isinstance(d, dict)) if r]
        return newest_releases_first(releases)
