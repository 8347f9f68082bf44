"""Check a download against what the release published (SPEC §7.2). Fail closed.

Every digest counts: the API's ``digest`` (any algorithm hashlib knows) and every entry for
the asset in any checksum file the release publishes. One contradiction refuses the asset.
"""

from __future__ import annotations

import hashlib
import re
from typing import Literal

from ..errors import VerificationError
from ..immutable import frozen
from ..sources.models import ReleaseAsset
from .download import Downloaded, discard

__all__ = [
    "KNOWN_ALGORITHMS",
    "Published",
    "VerifiedBy",
    "algorithms_for",
    "digest_algorithm",
    "parse_checksums",
    "verify",
]

VerifiedBy = Literal["digest", "checksums", "none"]

# Fixed-size digests only (shake_* need a length), as every Python has them.
KNOWN_ALGORITHMS = frozenset(a for a in hashlib.algorithms_guaranteed if not a.startswith("shake"))
# Hex length → algorithm, for checksum files that do not say which one they use.
_BY_LENGTH = {32: "md5", 40: "sha1", 56: "sha224", 64: "sha256", 96: "sha384", 128: "sha512"}
_LINE = re.compile(r"^([0-9a-fA-F]{32,128})(?:\s+\*?(.+?))?\s*$")
_BSD = re.compile(r"^([A-Za-z0-9_-]+) ?\((.+)\) ?= ?([0-9a-fA-F]{32,128})\s*$")
_NAMED_ALGO = re.compile(r"(sha(?:224|256|384|512)|sha1|md5)", re.IGNORECASE)


@frozen(slots=True)
class Published:
    """One published digest of an asset, and where it was published."""

    algorithm: str
    hexdigest: str
    source: Literal["digest", "checksums"]
    where: str


def _algorithm(name: str) -> str:
    """hashlib's name for an algorithm as releases spell it (``SHA-512`` → ``sha512``,
    ``SHA3-256`` → ``sha3_256``)."""
    text = name.strip().lower()
    if m := re.fullmatch(r"sha-?(1|224|256|384|512)", text):
        return f"sha{m.group(1)}"
    if m := re.fullmatch(r"sha3[-_]?(224|256|384|512)", text):
        return f"sha3_{m.group(1)}"
    return text.replace("-", "_")


def _label(algorithm: str) -> str:
    m = re.fullmatch(r"sha(\d+)", algorithm)
    return f"SHA-{m.group(1)}" if m else algorithm.upper()


def digest_algorithm(asset: ReleaseAsset) -> str | None:
    if not asset.digest or ":" not in asset.digest:
        return None
    return _algorithm(asset.digest.split(":", 1)[0])


def parse_checksums(
    text: str, *, implied: str | None = None, file_name: str = ""
) -> dict[str, list[tuple[str, str]]]:
    """``sha256sum``-style and BSD-style lines → {file name: [(algorithm, hex digest)]}.

    A bare digest line names ``implied`` (``<asset>.sha256`` files often hold only the hex)."""
    hint = _NAMED_ALGO.search(file_name)
    out: dict[str, list[tuple[str, str]]] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if m := _BSD.match(line):
            name, algo, hexd = m.group(2).strip(), _algorithm(m.group(1)), m.group(3)
        elif m := _LINE.match(line):
            hexd, name = m.group(1), (m.group(2) or "").strip() or (implied or "")
            if not name:
                continue
            guessed = _BY_LENGTH.get(len(hexd))
            algo = _algorithm(hint.group(1)) if hint else (guessed or "")
            if not algo or (guessed and hashlib.new(algo).digest_size * 2 != len(hexd)):
                algo = guessed or f"unknown-{len(hexd)}-hex"
        else:
            continue
        name = name.removeprefix("./")
        out.setdefault(name, []).append((algo, hexd.lower()))
    return out


def algorithms_for(asset: ReleaseAsset, published: list[Published]) -> frozenset[str]:
    """The hashes to compute while downloading ``asset``; unknown names are left to verify()."""
    names = {p.algorithm for p in published}
    if algo := digest_algorithm(asset):
        names.add(algo)
    return frozenset(n for n in names if n in KNOWN_ALGORITHMS)


def _fail(got: Downloaded, message: str) -> VerificationError:
    discard(got.path)
    return VerificationError(message)


def verify(
    asset: ReleaseAsset,
    got: Downloaded,
    *,
    published: list[Published] | None = None,
    require_checksum: bool = False,
) -> VerifiedBy:
    """Size, then every published digest; any mismatch deletes the part file and refuses."""
    if asset.size is not None and got.size != asset.size:
        raise _fail(
            got,
            f"{asset.name} is {got.size} bytes but the release says {asset.size}; nothing was "
            "installed, try again",
        )
    expected = list(published or [])
    if asset.digest:
        algo, _, hexd = asset.digest.partition(":")
        if not hexd:
            malformed = asset.digest[:40]
            raise _fail(
                got, f"{asset.name} has a malformed digest {malformed!r}; nothing was installed"
            )
        expected.insert(0, Published(_algorithm(algo), hexd.strip().lower(), "digest", "the API"))
    if not expected:
        if require_checksum:
            raise _fail(got, f"{asset.name} has no published checksum and a checksum is required")
        return "none"
    computed = {"sha256": got.sha256, **got.digests}
    for p in expected:
        if p.algorithm not in KNOWN_ALGORITHMS:
            raise _fail(
                got,
                f"{asset.name} is published with an unknown digest algorithm "
                f"{p.algorithm[:20]!r} ({p.where}); nothing was installed",
            )
        actual = computed.get(p.algorithm)
        if actual is None:  # not computed in-stream (a caller's omission): never skip it
            raise _fail(got, f"{asset.name}: its {p.algorithm} digest was not computed")
        if actual != p.hexdigest:
            raise _fail(
                got,
                f"{asset.name} {_label(p.algorithm)} {actual[:16]}… does not match the published "
                f"{p.hexdigest[:16]}… ({p.source}: {p.where}); nothing was installed",
            )
    return "digest" if expected[0].source == "digest" else "checksums"
