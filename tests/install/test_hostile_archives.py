"""Hostile releases through the real CLI and the loopback mirror: links that lead outside, split
bombs, unreadable archives and digests that contradict the bytes. Each must end in one
``error:`` line, install nothing, and leave no part file behind."""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import tarfile
import time
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from backendmgr.mirror import MirrorServer
from tests.support import (
    Entry,
    empty_files_tar_gz,
    make_tar,
    make_zip,
    publish,
    tree,
    zeros_bomb_tar_gz,
)
from tests.support.cli import Cli, error_line

SCRIPT = b"#!/bin/sh\necho tool 1.0\n"
TOOL_MANIFEST = (
    "id: tool\nkind: custom\nsource: {type: github, repo: me/tool}\n"
    "exe: {default: tool}\n"
    "variants: [{id: cpu, assets: {linux-x64: ['tool-linux-x64\\..+']}}]\n"
)


@pytest.fixture
def tool(config_path: Path) -> None:
    """A user manifest whose asset may be any archive format."""
    folder = config_path.parent / "manifests"
    folder.mkdir(parents=True)
    (folder / "tool.yaml").write_text(TOOL_MANIFEST)


def tool_entries(*extra: Entry) -> list[Entry]:
    return [Entry("tool/bin/tool", SCRIPT, mode=0o755), *extra]


def assert_nothing_installed(home: Path, config_path: Path) -> None:
    builds = home / "builds"
    assert not builds.exists() or all(tree(p) == [] for p in builds.iterdir()), tree(builds)
    assert list((home / "downloads").glob("*.part*")) == []
    assert not config_path.exists() or "tool@" not in config_path.read_text()


def refused(cli: Cli, tmp_path: Path, config_path: Path, *args: str) -> str:
    line = error_line(cli("install", "tool", *args))
    assert_nothing_installed(tmp_path / "home", config_path)
    return line


# --- 2: links that resolve outside the build -------------------------------------------------

DEEP = "/".join(["s"] * 14 + [".."] * 14)


@pytest.mark.parametrize(
    ("fmt", "order"),
    [("tar.gz", "s-first"), ("tar.gz", "t-first"), ("zip", "s-first"), ("zip", "t-first")],
)
def test_link_through_link_to_root_is_refused(
    cli: Cli,
    mirror: MirrorServer,
    mirror_root: Path,
    tmp_path: Path,
    config_path: Path,
    tool: None,
    fmt: str,
    order: str,
) -> None:
    s = Entry("tool/s", kind="symlink", target=".")
    t = Entry("tool/t", kind="symlink", target=DEEP)
    u = Entry("tool/u", kind="symlink", target="t/etc")
    links = [s, t, u] if order == "s-first" else [t, u, s]
    data = make_zip(tool_entries(*links)) if fmt == "zip" else make_tar(tool_entries(*links))
    publish(mirror_root, "me/tool", "v1", {f"tool-linux-x64.{fmt}": data})
    line = refused(cli, tmp_path, config_path)
    assert line.startswith(f"error: tool-linux-x64.{fmt}: refusing link 'tool/"), line
    assert "escapes" in line or "resolves outside" in line, line


def test_links_within_the_build_still_install(
    cli: Cli, mirror: MirrorServer, mirror_root: Path, tmp_path: Path, tool: None
) -> None:
    links = [
        Entry("tool/s", kind="symlink", target="."),
        Entry("tool/lib", kind="symlink", target="s/s/bin"),
        Entry("tool/bin/alias", kind="symlink", target="../s/bin/tool"),
    ]
    publish(mirror_root, "me/tool", "v1", {"tool-linux-x64.tar.gz": make_tar(tool_entries(*links))})
    assert cli("install", "tool").code == 0
    build = tmp_path / "home" / "builds" / "tool" / "v1-cpu" / "tool"
    assert (build / "lib" / "tool").read_bytes() == SCRIPT
    assert (build / "bin" / "alias").read_bytes() == SCRIPT


# --- 5: a bomb split across members ----------------------------------------------------------


def test_bomb_split_across_members_is_refused(
    cli: Cli, mirror: MirrorServer, mirror_root: Path, tmp_path: Path, config_path: Path, tool: None
) -> None:
    # Each member alone stays under 200:1 of the whole archive; together they are ~1000:1.
    zeros = [Entry(f"tool/zeros{i}.bin", b"\0" * (4 << 20)) for i in range(8)]
    data = make_tar(tool_entries(*zeros))
    assert len(data) * 200 > 4 << 20  # no single member trips the per-member limit
    publish(mirror_root, "me/tool", "v1", {"tool-linux-x64.tar.gz": data})
    line = refused(cli, tmp_path, config_path)
    assert "together expand more than 200:1" in line


@pytest.mark.parametrize("fmt", ["tar.gz", "zip", "tar"])
def test_total_unpacked_size_is_capped_by_the_setting(
    cli: Cli,
    mirror: MirrorServer,
    mirror_root: Path,
    tmp_path: Path,
    config_path: Path,
    tool: None,
    fmt: str,
) -> None:
    config_path.write_text("max_unpacked_gb: 0.002\n")  # about 2 MiB
    noise = [Entry(f"tool/noise{i}.bin", os.urandom(1 << 20)) for i in range(3)]
    entries = tool_entries(*noise)
    data = make_zip(entries) if fmt == "zip" else make_tar(entries, "gz" if fmt == "tar.gz" else "")
    publish(mirror_root, "me/tool", "v1", {f"tool-linux-x64.{fmt}": data})
    line = error_line(cli("install", "tool"))
    assert "unpacks to more than 0.002 GiB (max_unpacked_gb in the config" in line
    assert_nothing_installed(tmp_path / "home", config_path)
    config_path.write_text("max_unpacked_gb: 0.01\n")
    assert cli("install", "tool").code == 0


# --- 11: archives the libraries cannot read --------------------------------------------------


def _nul_in_pax_path() -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", format=tarfile.PAX_FORMAT) as tf:
        info = tarfile.TarInfo("tool/bin/placeholder")
        info.pax_headers = {"path": "tool/bin/x\x00y"}
        info.size = 1
        tf.addfile(info, io.BytesIO(b"a"))
    return buf.getvalue()


def _zip_patched(flag: int = 0, method: int | None = None) -> bytes:
    """A zip whose headers claim encryption (flag bit 0) or an unknown compression method."""
    data = bytearray(make_zip(tool_entries()))
    for sig, flag_at, method_at in ((b"PK\x03\x04", 6, 8), (b"PK\x01\x02", 8, 10)):
        at = data.find(sig)
        while at != -1:
            data[at + flag_at] |= flag
            if method is not None:
                data[at + method_at : at + method_at + 2] = method.to_bytes(2, "little")
            at = data.find(sig, at + 4)
    return bytes(data)


def _corrupt(data: bytes, keep: int) -> bytes:
    """Keep the container header, scramble the stream after it."""
    rest = bytes(b ^ 0x5A for b in data[keep:])
    return data[:keep] + rest


def _reserved_deflate_block() -> bytes:
    # gzip header, then a deflate block header with BFINAL=1 and the reserved BTYPE=11.
    return b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03" + b"\x07" + b"\0" * 64


def _reserved_deflate_in_zip() -> bytes:
    data = bytearray(make_zip([Entry("tool/bin/tool", SCRIPT * 40, mode=0o755)]))
    at = data.find(b"PK\x03\x04")
    name_len = int.from_bytes(data[at + 26 : at + 28], "little")
    extra_len = int.from_bytes(data[at + 28 : at + 30], "little")
    data[at + 30 + name_len + extra_len] = 0x07
    return bytes(data)


def _zip_offsets_shifted() -> bytes:
    """One byte cut from a local header's name: the central directory's offsets all land one
    byte early, the first before the file's start."""
    data = make_zip([Entry("tool/bin/tool", SCRIPT, mode=0o755), Entry("tool/a", b"x" * 400)])
    at = data.find(b"tool/a")
    return data[:at] + b"tool/" + data[at + 6 :]


def _long_name(component: int, depth: int = 1) -> Callable[[], bytes]:
    """A long member name (a pax header): ``depth`` folders of ``component`` bytes each."""

    def build() -> bytes:
        name = "tool/" + "/".join(["d" * component] * depth) + "/f"
        return make_tar([*tool_entries(), Entry(name, b"x")], "gz")

    return build


@pytest.mark.parametrize(
    ("name", "build", "reason"),
    [
        ("tool-linux-x64.zip", _zip_offsets_shifted, "not a readable archive"),
        ("tool-linux-x64.tar.gz", _long_name(256), "too long for the file system"),
        ("tool-linux-x64.tar.gz", _long_name(200, 40), "too long for the file system"),
        ("tool-linux-x64.tar.gz", _nul_in_pax_path, "control character"),
        ("tool-linux-x64.zip", lambda: _zip_patched(flag=0x1), "'tool/bin/tool' is encrypted"),
        ("tool-linux-x64.zip", lambda: _zip_patched(method=99), "not a readable archive"),
        (
            "tool-linux-x64.tar.xz",
            lambda: _corrupt(make_tar(tool_entries(), "xz"), 24),
            "not a readable archive",
        ),
        ("tool-linux-x64.tar.gz", _reserved_deflate_block, "not a readable archive"),
        ("tool-linux-x64.zip", _reserved_deflate_in_zip, "not a readable archive"),
        ("tool-linux-x64.tar.zst", lambda: b"\x28\xb5\x2f\xfd" + b"\xff" * 64, "not a readable"),
    ],
    ids=[
        "zip-offsets",
        "name-over-255",
        "path-over-3072",
        "nul-pax",
        "encrypted-zip",
        "zip-method-99",
        "lzma",
        "deflate-btype",
        "zip-btype",
        "zst",
    ],
)
def test_unreadable_archives_fail_in_one_line(
    cli: Cli,
    mirror: MirrorServer,
    mirror_root: Path,
    tmp_path: Path,
    config_path: Path,
    tool: None,
    name: str,
    build: Callable[[], bytes],
    reason: str,
) -> None:
    publish(mirror_root, "me/tool", "v1", {name: build()})
    line = refused(cli, tmp_path, config_path)
    assert line.startswith(f"error: {name}") and reason in line, line
    assert len(line) < 600, line  # a name quoted is cut short


def test_encrypted_zip_really_is_refused_by_the_library(tmp_path: Path) -> None:
    """The patched archive is what the test claims: zipfile asks for a password."""
    with zipfile.ZipFile(io.BytesIO(_zip_patched(flag=0x1))) as zf, pytest.raises(RuntimeError):
        zf.read("tool/bin/tool")


# --- 4: digests and checksum files that contradict the bytes ---------------------------------


def _retag(mirror: MirrorServer, make: Callable[[str, bytes], str | None]) -> None:
    """Replace every asset's API digest with ``make(name, bytes)``."""
    original = mirror.releases

    def listing(owner: str, repo: str) -> list[dict[str, object]] | None:
        releases = original(owner, repo)
        for release in releases or []:
            for asset in release["assets"]:
                path = mirror.root / owner / repo / str(release["tag_name"]) / str(asset["name"])
                asset["digest"] = make(str(asset["name"]), path.read_bytes())
        return releases

    mirror.releases = listing  # type: ignore[method-assign]


@pytest.mark.parametrize(
    ("digest", "message"),
    [
        (lambda d: "sha512:" + "0" * 128, "SHA-512"),
        (lambda d: "sha512:" + hashlib.sha512(d + b"x").hexdigest(), "SHA-512"),
        (lambda d: "sha1:" + "1" * 40, "SHA-1"),
        (lambda d: "SHA3-256:" + hashlib.sha3_256(d + b"x").hexdigest(), "SHA3_256"),
        (lambda d: "blake9:" + "ab" * 32, "unknown digest algorithm 'blake9'"),
        (lambda d: "shake_128:" + "ab" * 32, "unknown digest algorithm 'shake_128'"),
        (lambda d: "sha256", "has a malformed digest 'sha256'"),
    ],
    ids=["sha512-zeros", "sha512-other", "sha1", "sha3", "unknown", "shake", "malformed"],
)
def test_api_digest_of_any_algorithm_must_match(
    cli: Cli,
    mirror: MirrorServer,
    mirror_root: Path,
    tmp_path: Path,
    config_path: Path,
    tool: None,
    digest: Callable[[bytes], str],
    message: str,
) -> None:
    publish(mirror_root, "me/tool", "v1", {"tool-linux-x64.tar.gz": make_tar(tool_entries())})
    _retag(mirror, lambda name, data: digest(data))
    line = refused(cli, tmp_path, config_path)
    assert message in line and line.endswith("nothing was installed"), line


def test_matching_sha512_digest_installs(
    cli: Cli, mirror: MirrorServer, mirror_root: Path, tool: None
) -> None:
    publish(mirror_root, "me/tool", "v1", {"tool-linux-x64.tar.gz": make_tar(tool_entries())})
    _retag(mirror, lambda name, data: "sha512:" + hashlib.sha512(data).hexdigest())
    result = cli("--json", "install", "tool")
    assert result.code == 0, result
    assert json.loads(result.out)["assets"][0]["verified_by"] == "digest"


def _sums_files(name: str, data: bytes, good: bool) -> dict[str, dict[str, bytes]]:
    salt = b"" if good else b"tampered"
    s256 = hashlib.sha256(data + salt).hexdigest()
    s512 = hashlib.sha512(data + salt).hexdigest()
    return {
        "SHA256SUMS": {"SHA256SUMS": f"{s256}  {name}\n".encode()},
        "checksums.txt": {"checksums.txt": f"{s256} *./{name}\n".encode()},
        "asset.sha256": {f"{name}.sha256": f"{s256}\n".encode()},
        "asset.sha512": {f"{name}.sha512": f"{s512}  {name}\n".encode()},
        "SHA512SUMS": {"SHA512SUMS": f"{s512}  {name}\n".encode()},
        "bsd": {"tool_1_checksums.txt": f"SHA512 ({name}) = {s512}\n".encode()},
    }


SUMS = ["SHA256SUMS", "checksums.txt", "asset.sha256", "asset.sha512", "SHA512SUMS", "bsd"]


@pytest.mark.parametrize("kind", SUMS)
@pytest.mark.parametrize("api_digest", [True, False], ids=["with-api-digest", "no-api-digest"])
def test_contradicting_checksum_file_is_refused(
    cli: Cli,
    mirror: MirrorServer,
    mirror_root: Path,
    tmp_path: Path,
    config_path: Path,
    tool: None,
    kind: str,
    api_digest: bool,
) -> None:
    name, data = "tool-linux-x64.tar.gz", make_tar(tool_entries())
    sums = _sums_files(name, data, good=False)[kind]
    publish(mirror_root, "me/tool", "v1", {name: data, **sums})
    if not api_digest:
        _retag(mirror, lambda n, d: None)
    line = refused(cli, tmp_path, config_path)
    assert "does not match the published" in line and f"(checksums: {next(iter(sums))})" in line


@pytest.mark.parametrize("kind", SUMS)
def test_agreeing_checksum_file_verifies(
    cli: Cli, mirror: MirrorServer, mirror_root: Path, tmp_path: Path, tool: None, kind: str
) -> None:
    name, data = "tool-linux-x64.tar.gz", make_tar(tool_entries())
    publish(mirror_root, "me/tool", "v1", {name: data, **_sums_files(name, data, good=True)[kind]})
    _retag(mirror, lambda n, d: None)
    result = cli("--json", "install", "tool")
    assert result.code == 0, result
    assert json.loads(result.out)["assets"][0]["verified_by"] == "checksums"
    assert list((tmp_path / "home" / "downloads").glob("*.part*")) == []


def test_builtin_manifest_uses_a_published_checksum_file(
    cli: Cli, mirror: MirrorServer, mirror_root: Path, tmp_path: Path, config_path: Path
) -> None:
    """llama-server's manifest names no checksum pattern; a SHA256SUMS still counts."""
    from tests.support import llama_entries

    name = "llama-b100-bin-ubuntu-vulkan-x64.tar.gz"
    data = make_tar(llama_entries("b100"))
    sums = f"{hashlib.sha256(b'other').hexdigest()}  {name}\n".encode()
    publish(mirror_root, "ggml-org/llama.cpp", "b100", {name: data, "SHA256SUMS": sums})
    line = error_line(cli("install", "llama-server"))
    assert "(checksums: SHA256SUMS)" in line
    assert list((tmp_path / "home" / "downloads").glob("*.part*")) == []
    assert not config_path.exists()


# --- costs that grow with the archive, not with its compression ratio -------------------------


def test_archive_of_too_many_empty_files_is_refused_for_its_count(
    cli: Cli, mirror: MirrorServer, mirror_root: Path, tmp_path: Path, config_path: Path, tool: None
) -> None:
    # 0.7 MB that tarfile's own gzip reader took minutes over (its buffer copied per header)
    data = empty_files_tar_gz(100_001)
    publish(mirror_root, "me/tool", "v1", {"tool-linux-x64.tar.gz": data})
    started = time.monotonic()
    line = refused(cli, tmp_path, config_path)
    assert "more than 100000 entries" in line
    assert time.monotonic() - started < 120  # a sanity bound; scripts/bench.py owns the speed


def _written_and_peak() -> tuple[int, int]:
    """Bytes this process has handed to write() so far, and its peak resident KiB."""
    wchar = int(re.search(r"^wchar: (\d+)", Path("/proc/self/io").read_text(), re.M)[1])  # type: ignore[index]
    hwm = int(re.search(r"^VmHWM:\s+(\d+)", Path("/proc/self/status").read_text(), re.M)[1])  # type: ignore[index]
    return wchar, hwm


@pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="needs Linux's /proc")
def test_split_bomb_is_refused_before_it_writes_much(
    cli: Cli, mirror: MirrorServer, mirror_root: Path, tmp_path: Path, config_path: Path, tool: None
) -> None:
    # 8 x 256 MiB of zeros in 2 MB: each member is under 200:1 of the whole, together ~1000:1.
    # The ratio of the whole is known only at its end; the ratio so far gives it away early.
    data = zeros_bomb_tar_gz(8, 256 << 20)
    publish(mirror_root, "me/tool", "v1", {"tool-linux-x64.tar.gz": data})
    Path("/proc/self/clear_refs").write_text("5")  # the peak starts again from here
    written, _ = _written_and_peak()
    resident = int(re.search(r"^VmRSS:\s+(\d+)", Path("/proc/self/status").read_text(), re.M)[1])  # type: ignore[index]
    line = refused(cli, tmp_path, config_path)
    assert "together expand more than 200:1" in line
    wrote, peak = _written_and_peak()
    assert wrote - written < 160 << 20  # the whole would be 2 GiB; the ratio of the whole, 400 MB
    assert peak - resident < 100 << 10  # KiB: decompressed in bounded pieces
