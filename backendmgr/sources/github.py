"""GitHub releases: listing with an ETag cache on disk, tag lookup, "latest" selection (§6)."""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Callable, Iterable
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

from .._fs import atomic_write_bytes, read_regular, sanitize_segment
from ..errors import MalformedId, NetworkError, NotFound, did_you_mean
from ..net import DEFAULT_API, NetSettings, get_bounded
from .models import Release, ReleaseAsset, newest_releases_first, tag_problem

__all__ = ["CACHE_SECONDS", "GithubReleases", "validate_repo"]

CACHE_SECONDS = 600
MAX_API_BYTES = 32 << 20  # a listing of 100 releases is well under 1 MiB
MAX_CACHE_BYTES = 4 * MAX_API_BYTES  # kept as ASCII JSON: up to 3 bytes for one received
_PART = re.compile(r"^[A-Za-z0-9_.-]+$")


def validate_repo(repo: str) -> str:
    owner, sep, name = repo.partition("/")
    if not sep or any(not _PART.match(p) or p in (".", "..") for p in (owner, name)):
        raise NotFound(f'"{repo}" is not a GitHub repository name (owner/name)')
    return repo


def _size(value: Any) -> int | None:
    ok = isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 1 << 62
    return value if ok else None


def _published(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value or len(value) > 64:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def _parse_release(data: dict[str, Any]) -> Release | None:
    """A release from the API's JSON; fields of the wrong type are treated as absent."""
    if data.get("draft"):
        return None
    raw_assets = data.get("assets")
    assets = tuple(
        ReleaseAsset(
            name=str(a.get("name", "")),
            url=str(a.get("browser_download_url", "")),
            size=_size(a.get("size")),
            digest=a.get("digest") if isinstance(a.get("digest"), str) else None,
        )
        for a in (raw_assets if isinstance(raw_assets, list) else [])
        if isinstance(a, dict) and a.get("name") and a.get("browser_download_url")
    )
    return Release(
        tag=str(data.get("tag_name", "")),
        name=str(data.get("name") or ""),
        published_at=_published(data.get("published_at")),
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
        """Keyed by the whole API base (scheme, host, port, path): two mirrors on one host
        never share a listing."""
        base = self.net.api_base.rstrip("/")
        key = hashlib.sha256(base.encode()).hexdigest()[:12]
        folder = f"{sanitize_segment(self.net.api_host)[:48]}-{key}"
        return (
            self.cache_dir
            / "github"
            / folder
            / (sanitize_segment(repo.replace("/", "__")) + ".json")
        )

    def _read_cache(self, repo: str) -> dict[str, Any] | None:
        """The cached listing, or None for anything else in its place: a FIFO (whose open
        would wait), a link to ``/dev/zero``, a huge file, JSON nested too deep to parse."""
        try:
            raw = read_regular(self._cache_file(repo), MAX_CACHE_BYTES, follow=False)
            data = json.loads(raw) if len(raw) <= MAX_CACHE_BYTES else None
        except (OSError, ValueError, RecursionError):
            return None
        return data if isinstance(data, dict) and isinstance(data.get("releases"), list) else None

    def _write_cache(self, repo: str, etag: str | None, releases: list[Any]) -> None:
        payload = {"etag": etag, "fetched_at": self.clock(), "releases": releases}
        where = self._cache_file(repo)
        body = json.dumps(payload).encode()  # a cache: atomic, not durable (fetched again)
        atomic_write_bytes(where, body, no_links_below=where.parent, durable=False)

    async def _get(self, url: str, headers: dict[str, str]) -> httpx.Response:
        """GET an API URL (:func:`get_bounded`); a redirect elsewhere never carries the token."""
        return await get_bounded(
            self.client,
            self.net,
            url,
            headers,
            max_bytes=MAX_API_BYTES,
            what=f"the API at {self.net.api_host}",
        )

    @staticmethod
    def _json(response: httpx.Response, repo: str) -> Any:
        try:
            return response.json()
        except (ValueError, RecursionError) as exc:
            raise NetworkError(f"GitHub API sent invalid JSON for {repo}") from exc

    def _raise_for(self, response: httpx.Response, repo: str) -> None:
        if (
            response.status_code in (403, 429)
            and response.headers.get("x-ratelimit-remaining") == "0"
        ):
            reset = response.headers.get("x-ratelimit-reset", "")
            when = "later"
            if reset.isascii() and reset.isdigit() and len(reset) <= 11:
                when = datetime.fromtimestamp(int(reset)).astimezone().strftime("%H:%M %Z").strip()
            raise NetworkError(f"GitHub rate limit reached; resets at {when}; set GITHUB_TOKEN")
        if response.status_code == 404:
            where = "GitHub" if self.net.api_base == DEFAULT_API else self.net.api_base
            raise NotFound(f"{where} has no repository {repo} (HTTP 404)")
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
        body = self._json(response, repo)
        if not isinstance(body, list):
            raise NetworkError(f"GitHub API sent an unexpected document for {repo}")
        self._write_cache(repo, response.headers.get("etag"), body)
        return self._parsed(body)

    async def release_by_tag(self, repo: str, tag: str, known: Iterable[str] = ()) -> Release:
        """One release by its tag; ``known`` tags (the listing) name the nearest when it has
        none such (``b11210`` → ``did you mean b11211?``)."""
        validate_repo(repo)
        problem = tag_problem(tag)
        if problem is not None:
            raise MalformedId(problem)
        self.net.require_online(f"looking up release {tag} of {repo}")
        headers = {"Accept": "application/vnd.github+json"}
        url = f"{self.net.api_base}/repos/{repo}/releases/tags/{quote(tag, safe='')}"
        response = await self._get(url, headers)
        if response.status_code == 404:
            raise NotFound(f"{repo} has no release {tag}{did_you_mean(tag, known)}")
        if response.status_code != 200:
            self._raise_for(response, repo)
        body = self._json(response, repo)
        release = _parse_release(body) if isinstance(body, dict) else None
        if release is None:
            raise NotFound(f"{repo} has no published release {tag}")
        problem = tag_problem(release.tag)
        if problem is not None:
            raise NetworkError(f"{repo}: the API answered {tag} with a refused tag: {problem}")
        return release

    @staticmethod
    def _parsed(raw: list[Any]) -> list[Release]:
        """The usable releases: a tag that cannot name a build is left out (the others stay
        usable; asking for that tag by name says why)."""
        parsed = (_parse_release(d) for d in raw if isinstance(d, dict))
        return newest_releases_first([r for r in parsed if r and tag_problem(r.tag) is None])
