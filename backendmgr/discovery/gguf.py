"""A GGUF header reader that reads only the key/value pairs backendmgr needs (SPEC §10.2).

It walks the key/value section of a memory map, decodes only wanted keys, steps over every
other value without decoding it (a 150 000-token vocabulary is skipped by its string lengths),
and stops as soon as every wanted key is known. The tensor section is never touched. Any
truncation or nonsense is a :class:`GgufError` naming the file and the byte offset.

Hostile headers are ordinary input: nesting depth, the elements and string bytes it decodes
and the number of strings it walks are all bounded (the ``MAX_*`` constants), so memory
stays small and time stays short whatever the header claims; a wanted value over a bound is
simply unknown.
"""

from __future__ import annotations

import mmap
import struct
from collections.abc import Iterable
from pathlib import Path
from typing import Any

__all__ = ["ARCH_KEYS", "GENERAL_KEYS", "UNKNOWN", "GgufError", "read_gguf_metadata"]

GENERAL_KEYS = frozenset({"general.architecture", "general.type", "general.name"})
ARCH_KEYS = frozenset(
    {
        "block_count",
        "context_length",
        "embedding_length",
        "attention.head_count",
        "attention.head_count_kv",
        "attention.key_length",
        "attention.value_length",
        "attention.key_length_swa",
        "attention.value_length_swa",
        "attention.sliding_window",
        "attention.sliding_window_pattern",
        "attention.causal",
        "attention.kv_lora_rank",
        "rope.dimension_count",
        "full_attention_interval",
        "ssm.inner_size",
        "ssm.state_size",
        "ssm.conv_kernel",
        "pooling_type",
        "expert_count",
    }
)

# value type → (struct format, size) for fixed-size scalars
_SCALARS: dict[int, tuple[str, int]] = {
    0: ("<B", 1),
    1: ("<b", 1),
    2: ("<H", 2),
    3: ("<h", 2),
    4: ("<I", 4),
    5: ("<i", 4),
    6: ("<f", 4),
    7: ("<?", 1),
    10: ("<Q", 8),
    11: ("<q", 8),
    12: ("<d", 8),
}
_STRING, _ARRAY = 8, 9
_MAX_STRING = 1 << 30
_MAX_COUNT = 1 << 40
# What the reader materialises is bounded, whatever the header claims (issue: hostile files).
MAX_KEY = 256  # a longer key cannot be one we want: it is stepped over, never decoded
MAX_TEXT = 1024  # a wanted string longer than this is unknown, not decoded
MAX_ITEMS = 4096  # a wanted array longer than this (more than any layer count) is unknown
MAX_DEPTH = 8  # arrays of arrays nested deeper: not a plausible header
MAX_WALK = 1 << 23  # elements walked one by one (strings of arrays, arrays of arrays), in all
MAX_KV = 1 << 16  # key/value pairs in one header


class _Unknown:
    """A wanted value the reader refused to materialise (too long, too many items)."""

    __slots__ = ()


UNKNOWN: Any = _Unknown()


class GgufError(ValueError):
    """The file is not a readable GGUF; the message names the file and the offset."""


class _Reader:
    __slots__ = ("buf", "end", "name", "off", "walked")

    def __init__(self, buf: Any, name: str) -> None:
        self.buf = buf
        self.end = len(buf)
        self.name = name
        self.off = 0
        self.walked = 0

    def walk(self, count: int, what: str, at: int) -> None:
        """Charge ``count`` one-by-one steps to the header's budget (time stays bounded)."""
        self.walked += count
        if self.walked > MAX_WALK:
            raise self.fail(f"{what} of {count} elements is not plausible", at)

    def fail(self, what: str, at: int | None = None) -> GgufError:
        return GgufError(f"{self.name}: {what} at offset {self.off if at is None else at}")

    def need(self, n: int) -> None:
        if self.off + n > self.end:
            raise self.fail(f"truncated: {n} bytes needed, {self.end - self.off} left")

    def u32(self) -> int:
        self.need(4)
        (v,) = struct.unpack_from("<I", self.buf, self.off)
        self.off += 4
        return int(v)

    def u64(self) -> int:
        self.need(8)
        (v,) = struct.unpack_from("<Q", self.buf, self.off)
        self.off += 8
        return int(v)

    def string(self, limit: int = MAX_TEXT) -> Any:
        """The string, or :data:`UNKNOWN` (stepped over) when it is longer than ``limit``."""
        start = self.off
        n = self.u64()
        if n > _MAX_STRING:
            raise self.fail(f"string length {n} is not plausible", start)
        self.need(n)
        if n > limit:
            self.off += n
            return UNKNOWN
        raw = bytes(self.buf[self.off : self.off + n])
        self.off += n
        return raw.decode("utf-8", "replace")

    def skip_string(self) -> None:
        n = self.u64()
        if n > _MAX_STRING:
            raise self.fail(f"string length {n} is not plausible", self.off - 8)
        self.need(n)
        self.off += n

    def scalar(self, vtype: int) -> Any:
        fmt, size = _SCALARS[vtype]
        self.need(size)
        (v,) = struct.unpack_from(fmt, self.buf, self.off)
        self.off += size
        return v

    def value(self, vtype: int, *, decode: bool) -> Any:
        if vtype in _SCALARS:
            if decode:
                return self.scalar(vtype)
            self.need(_SCALARS[vtype][1])
            self.off += _SCALARS[vtype][1]
            return None
        if vtype == _STRING:
            if decode:
                return self.string()
            self.skip_string()
            return None
        if vtype == _ARRAY:
            return self.array(decode=decode, depth=1)
        raise self.fail(f"unknown value type {vtype}", self.off - 4)

    def array(self, *, decode: bool, depth: int) -> Any:
        """An array's elements, None when not decoded, :data:`UNKNOWN` when too large.

        Never recursive beyond :data:`MAX_DEPTH`, never allocating more than
        :data:`MAX_ITEMS` elements: fixed-size elements are stepped over by arithmetic.
        """
        start = self.off
        if depth > MAX_DEPTH:
            raise self.fail(f"arrays nested deeper than {MAX_DEPTH}", start)
        etype = self.u32()
        count = self.u64()
        if count > _MAX_COUNT:
            raise self.fail(f"array length {count} is not plausible", start)
        wanted, decode = decode, decode and count <= MAX_ITEMS
        if etype in _SCALARS:
            fmt, size = _SCALARS[etype]
            total = size * count
            self.need(total)
            if decode:
                values = list(struct.unpack_from(f"<{count}{fmt[1]}", self.buf, self.off))
                self.off += total
                return values
            self.off += total
            return UNKNOWN if wanted else None
        if etype == _STRING:
            self.need(8 * count)  # every element has at least its length
            if decode:
                items = [self.string() for _ in range(count)]
                return UNKNOWN if any(i is UNKNOWN for i in items) else items
            self.walk(count, "string array", start)
            # Step over each string by its length, decoding nothing; the hot loop of a cold scan.
            buf, off, end, unpack = self.buf, self.off, self.end, struct.unpack_from
            for _ in range(count):
                if off + 8 > end:
                    self.off = off
                    raise self.fail("truncated inside a string array")
                (n,) = unpack("<Q", buf, off)
                off += 8 + n
            if off > end:
                raise self.fail("truncated inside a string array")
            self.off = off
            return UNKNOWN if wanted else None
        if etype == _ARRAY:
            self.need(12 * count)  # every element has at least its type and count
            self.walk(count, "array of arrays", start)
            for _ in range(count):  # no wanted key holds arrays of arrays: never decoded
                self.array(decode=False, depth=depth + 1)
            return UNKNOWN if wanted else None
        raise self.fail(f"unknown array element type {etype}", start)


def _wanted(key: str, arch: str | None) -> bool:
    if key in GENERAL_KEYS:
        return True
    if arch is None:
        return False
    return (
        key.startswith(arch)
        and key[len(arch) : len(arch) + 1] == "."
        and (key[len(arch) + 1 :] in ARCH_KEYS)
    )


def parse_header(buf: Any, name: str, *, keys: Iterable[str] | None = None) -> dict[str, Any]:
    """Decode the wanted keys of a GGUF header held in ``buf`` (bytes or a memory map)."""
    r = _Reader(buf, name)
    r.need(4)
    if bytes(buf[0:4]) != b"GGUF":
        raise r.fail("not a GGUF file (bad magic)", 0)
    r.off = 4
    version = r.u32()
    if version not in (2, 3):
        if version in (0x02000000, 0x03000000):
            raise r.fail("big-endian GGUF is not supported", 4)
        raise r.fail(f"unsupported GGUF version {version}", 4)
    r.u64()  # tensor count: not needed
    kv_count = r.u64()
    if kv_count > MAX_KV:
        raise r.fail(f"key/value count {kv_count} is not plausible", 16)
    out: dict[str, Any] = {"__gguf_version": version}
    extra = set(keys or ())
    arch: str | None = None
    for _ in range(kv_count):
        key = r.string(MAX_KEY)
        vtype = r.u32()
        want = isinstance(key, str) and (_wanted(key, arch) or key in extra)
        value = r.value(vtype, decode=want)
        if want and value is not UNKNOWN:  # too large to keep: the key stays unknown
            out[key] = value
            if key == "general.architecture" and isinstance(value, str):
                arch = value
                # keys seen before the architecture was known are rare; they are re-read below
        if arch is not None and _complete(out, arch, extra):
            break
    return out


def _complete(found: dict[str, Any], arch: str, extra: set[str]) -> bool:
    if len(found) < len(GENERAL_KEYS) + len(ARCH_KEYS) + len(extra) + 1:
        return False
    return (
        all(k in found for k in GENERAL_KEYS)
        and all(f"{arch}.{k}" in found for k in ARCH_KEYS)
        and all(k in found for k in extra)
    )


def read_gguf_metadata(path: Path) -> dict[str, Any]:
    """The wanted header keys of ``path``; raises :class:`GgufError` for a bad file."""
    try:
        with path.open("rb") as fh:
            size = fh.seek(0, 2)
            if size < 24:
                fh.seek(0)
                return parse_header(fh.read(), str(path))
            with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
                result = parse_header(mm, str(path))
        arch = result.get("general.architecture")
        if isinstance(arch, str) and not any(k.startswith(arch + ".") for k in result):
            # The architecture key came after its own keys (unusual writers): read once more.
            with path.open("rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
                result = parse_header(mm, str(path), keys=[f"{arch}.{k}" for k in ARCH_KEYS])
    except GgufError:
        raise
    except OSError as exc:
        raise GgufError(f"{path}: cannot read ({exc.strerror or exc})") from exc
    except (ValueError, ArithmeticError, RecursionError, MemoryError, struct.error) as exc:
        # The bounds above should make these unreachable; a header is still never a crash.
        raise GgufError(f"{path}: unreadable GGUF header ({type(exc).__name__})") from exc
    return result
