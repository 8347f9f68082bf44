"""SHA-256 in hex, with ``hashlib`` loaded by the first digest: a read keys a tuned context or
a verify result by one only when such a record exists, and loading OpenSSL costs more than a
read's own work (``which``, ``models`` on a home that has none)."""

from __future__ import annotations

__all__ = ["sha256_hex"]


def sha256_hex(data: bytes) -> str:
    import hashlib  # here, not above: see the module's docstring

    return hashlib.sha256(data).hexdigest()
