"""Installer behaviour against a real loopback server serving real archives."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from backendmgr.mirror import MirrorHandler, MirrorServer
from tests.support import make_tar, publish, publish_llama, server_script, tree
from tests.support.cli import Cli, error_line, ok


def registry(cli: Cli) -> list[tuple[str, str, str, bool, bool, str]]:
    result = cli("--json", "backends")
    assert result.code == 0, result
    return [
        (r["id"], r["version"], r["variant"], r["default"], r["build"], r["path"])
        for r in json.loads(result.out)
    ]


def exe(home: Path, build: str) -> str:
    return str(home / "builds" / "llama-server" / build / "build" / "bin" / "llama-server")


def strip_digests(mirror: MirrorServer) -> None:
    """Make the mirror publish no per-asset digest, as some releases do not."""
    original = mirror.releases

    def undigested(owner: str, repo: str) -> list[dict[str, object]] | None:
        listing = original(owner, repo)
        for release in listing or []:
            for asset in release["assets"]:
                asset["digest"] = None
        return listing

    mirror.releases = undigested  # type: ignore[method-assign]


def test_round_trip_two_versions_two_variants(
    cli: Cli, mirror: MirrorServer, mirror_root: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    publish_llama(mirror_root, "b100", ["vulkan", "rocm"], published_at="2026-09-01T00:00:00Z")
    publish_llama(mirror_root, "b200", ["vulkan", "rocm"], published_at="2026-09-20T00:00:00Z")

    first = ok(cli("--json", "install", "llama-server", "b100"))
    data = json.loads(first.out)
    assert (data["id"], data["activated"], data["already_installed"]) == (
        "llama-server@b100-vulkan",
        True,
        False,
    )
    assert data["assets"][0]["verified_by"] == "digest"
    assert registry(cli) == [
        ("llama-server", "b100", "vulkan", True, False, exe(home, "b100-vulkan")),
        ("llama-server@b100-vulkan", "b100", "vulkan", False, True, exe(home, "b100-vulkan")),
    ]

    second = ok(cli("install", "llama-server"))  # latest: b200, suggested variant vulkan
    assert second.out.splitlines()[0] == (
        "installed llama-server@b200-vulkan; llama-server stays on its activated build; switch "
        'with "backendmgr activate llama-server@b200-vulkan"'
    )
    # issue 33: what changed on disk; no model moved, as the activated build stayed
    assert second.out.splitlines()[-1].endswith("llama-swap.yaml (no entry changed)")
    ok(cli("install", "llama-server", "b200", "--variant", "rocm"))
    assert registry(cli) == [
        ("llama-server", "b100", "vulkan", True, False, exe(home, "b100-vulkan")),
        ("llama-server@b200-rocm", "b200", "rocm", False, True, exe(home, "b200-rocm")),
        ("llama-server@b200-vulkan", "b200", "vulkan", False, True, exe(home, "b200-vulkan")),
        ("llama-server@b100-vulkan", "b100", "vulkan", False, True, exe(home, "b100-vulkan")),
    ]

    again = ok(cli("install", "llama-server", "b200", "--variant", "rocm"))
    assert "already installed" in again.out

    ok(cli("activate", "llama-server@b200-vulkan"))
    assert registry(cli)[0] == (
        "llama-server",
        "b200",
        "vulkan",
        True,
        False,
        exe(home, "b200-vulkan"),
    )

    listed = json.loads(ok(cli("--json", "list")).out)
    assert [(b["id"], b["activated"]) for b in listed] == [
        ("llama-server@b200-rocm", False),
        ("llama-server@b200-vulkan", True),
        ("llama-server@b100-vulkan", False),
    ]
    assert set(listed[0]) >= {
        "id",
        "component",
        "version",
        "variant",
        "activated",
        "path",
        "dir",
        "size_bytes",
        "installed_at",
        "sha256",
        "verified_by",
        "pinned_by",
    }

    refused = cli("uninstall", "llama-server@b200-vulkan")
    assert refused.code == 1 and "activate another build first" in refused.err

    ok(cli("pin", "qwen3-8b", "llama-server@b200-rocm"))
    pinned = cli("uninstall", "llama-server@b200-rocm")
    assert pinned.code == 1 and "pinned by qwen3-8b" in pinned.err
    assert json.loads(ok(cli("--json", "list")).out)[0]["pinned_by"] == ["qwen3-8b"]
    forced = ok(cli("uninstall", "llama-server@b200-rocm", "--force"))
    assert "stale pins now fall back: qwen3-8b" in forced.err
    ok(cli("uninstall", "llama-server@b100"))  # one variant of b100 installed: short form works
    assert registry(cli) == [
        ("llama-server", "b200", "vulkan", True, False, exe(home, "b200-vulkan")),
        ("llama-server@b200-vulkan", "b200", "vulkan", False, True, exe(home, "b200-vulkan")),
    ]
    assert sorted(p.name for p in (home / "builds" / "llama-server").iterdir()) == ["b200-vulkan"]
    assert not list((home / "downloads").glob("*.part"))
    doctor = cli("doctor")  # issue 33: and no models folder has qwen3-8b: a problem
    assert doctor.code == 1
    assert doctor.err.splitlines() == [
        'warning: model "qwen3-8b" is pinned to missing row "llama-server@b200-rocm"; '
        "it falls back",
        'error: settings for "qwen3-8b" (pin to "llama-server@b200-rocm") match no model in '
        "models_dirs (doctor --fix removes them)",
    ]

    # the last build of a component goes only with --force; its managed row goes with it
    sole = cli("uninstall", "llama-server@b200-vulkan")
    assert sole.code == 1 and "the only build of llama-server; use --force" in sole.err
    ok(cli("uninstall", "llama-server@b200-vulkan", "--force"))
    assert registry(cli) == []


def test_install_behind_a_manual_row_does_not_steal_star(
    cli: Cli, mirror: MirrorServer, mirror_root: Path
) -> None:
    publish_llama(mirror_root, "b100")
    ok(cli("backends", "add", "mine", "--kind", "llama", "--path", "/opt/llama-server", "--force"))
    out = ok(cli("install", "llama-server")).out
    assert "but mine is the default for class llm" in out
    assert [(r[0], r[3]) for r in registry(cli)] == [
        ("mine", False),
        ("llama-server", False),
        ("llama-server@b100-vulkan", False),
    ]


def test_dry_run_prints_plan_and_writes_nothing(
    cli: Cli, mirror: MirrorServer, mirror_root: Path, tmp_path: Path, config_path: Path
) -> None:
    assets = publish_llama(mirror_root, "b100", ["vulkan"])
    from tests.support import B11211_ASSETS

    publish(
        mirror_root,
        "ggml-org/llama.cpp",
        "b11211",
        dict.fromkeys(B11211_ASSETS, b"x"),
        published_at="2026-09-27T00:00:00Z",
    )
    result = ok(
        cli(
            "--json",
            "install",
            "llama-server",
            "--dry-run",
            "--platform",
            "windows-x64",
            "--variant",
            "cuda",
        )
    )
    plan = json.loads(result.out)
    assert plan["dry_run"] is True and plan["version"] == "b11211"
    assert [a["name"] for a in plan["assets"]] == [
        "llama-b11211-bin-win-cuda-13.4-x64.zip",
        "cudart-llama-bin-win-cuda-13.4-x64.zip",
    ]
    assert plan["assets"][0]["sha256"] == hashlib.sha256(b"x").hexdigest()
    assert plan["path"].endswith("b11211-cuda/llama-server.exe")
    text = ok(cli("install", "llama-server", "b100", "--dry-run")).out
    assert "would install llama-server@b100-vulkan" in text
    assert next(iter(assets)) in text
    assert not (tmp_path / "home" / "builds").exists() and not config_path.exists()
    assert cli("install", "llama-server", "--platform", "linux-arm64").code == 2  # usage


def test_latest_skips_releases_without_the_variant_and_prereleases(
    cli: Cli, mirror: MirrorServer, mirror_root: Path
) -> None:
    publish_llama(mirror_root, "b100", ["vulkan"], published_at="2026-09-01T00:00:00Z")
    publish_llama(mirror_root, "b200", ["cpu"], published_at="2026-09-02T00:00:00Z")
    publish(
        mirror_root,
        "ggml-org/llama.cpp",
        "b300",
        {"llama-b300-bin-ubuntu-vulkan-x64.tar.gz": make_tar([])},
        published_at="2026-09-03T00:00:00Z",
        prerelease=True,
    )
    data = json.loads(ok(cli("--json", "install", "llama-server", "--dry-run")).out)
    assert data["version"] == "b100"
    releases = json.loads(ok(cli("--json", "releases", "llama-server")).out)
    assert [(r["tag"], r["prerelease"], r["variants"]) for r in releases] == [
        ("b300", True, ["vulkan"]),
        ("b200", False, ["cpu"]),
        ("b100", False, ["vulkan"]),
    ]


def test_explicit_tag_falls_back_to_tags_endpoint(
    cli: Cli, mirror: MirrorServer, mirror_root: Path
) -> None:
    publish_llama(mirror_root, "b100")
    listing_without_b50: Callable[[MirrorHandler], bool]

    def hide_b50(handler: MirrorHandler) -> bool:
        if handler.route.endswith("/releases"):
            releases = [
                r for r in mirror.releases("ggml-org", "llama.cpp") or [] if r["tag_name"] != "b50"
            ]
            handler.send_json(200, releases)
            return True
        return False

    listing_without_b50 = hide_b50
    mirror.hooks.append(listing_without_b50)
    publish_llama(mirror_root, "b50")
    ok(cli("install", "llama-server", "b50"))
    assert any("/releases/tags/b50" in path for path, _ in mirror.requests)
    missing = cli("install", "llama-server", "b999")
    assert missing.code == 1 and "has no release b999" in missing.err


@pytest.mark.parametrize(
    ("tamper", "message"),
    [
        ("digest", "does not match the published"),
        ("size", "but the release says"),
        ("byte", "does not match the published"),
    ],
)
def test_verification_failures_install_nothing(
    cli: Cli,
    mirror: MirrorServer,
    mirror_root: Path,
    tmp_path: Path,
    config_path: Path,
    tamper: str,
    message: str,
) -> None:
    assets = publish_llama(mirror_root, "b100")
    name, data = next(iter(assets.items()))
    original = mirror.releases

    def tampered(owner: str, repo: str) -> list[dict[str, object]] | None:
        listing = original(owner, repo)
        for release in listing or []:
            for asset in release["assets"]:
                if tamper == "digest":
                    asset["digest"] = "sha256:" + "0" * 64
                elif tamper == "size":
                    asset["size"] = len(data) + 1
        return listing

    mirror.releases = tampered  # type: ignore[method-assign]
    if tamper == "byte":
        corrupted = bytearray(data)
        corrupted[len(corrupted) // 2] ^= 0xFF
        # the listing was computed from the good file; serve a flipped byte afterwards
        digests = original("ggml-org", "llama.cpp")
        (mirror_root / "ggml-org/llama.cpp/b100" / name).write_bytes(bytes(corrupted))
        mirror.releases = lambda o, r: digests  # type: ignore[method-assign,assignment]
    result = cli("install", "llama-server")
    assert result.code == 1, result
    assert message in error_line(result)
    home = tmp_path / "home"
    assert (
        not (home / "builds" / "llama-server").exists()
        or tree(home / "builds" / "llama-server") == []
    )
    assert list((home / "downloads").glob("*.part")) == []
    assert not config_path.exists()


def test_no_published_checksum_warns_or_fails_with_require(
    cli: Cli, mirror: MirrorServer, mirror_root: Path
) -> None:
    publish_llama(mirror_root, "b100")
    strip_digests(mirror)
    strict = cli("install", "llama-server", "--require-checksum")
    assert strict.code == 1 and "no published checksum" in strict.err
    loose = ok(cli("--json", "install", "llama-server"))
    assert json.loads(loose.out)["assets"][0]["verified_by"] == "none"
    assert loose.err.startswith("warning: no checksum was published")


def test_failed_smoke_check_registers_nothing(
    cli: Cli, mirror: MirrorServer, mirror_root: Path, tmp_path: Path, config_path: Path
) -> None:
    publish_llama(mirror_root, "b100", fail=True)
    result = cli("install", "llama-server")
    assert result.code == 1
    assert "llama-server --version failed with exit status 132: Illegal instruction" in result.err
    assert not config_path.exists()
    assert tree(tmp_path / "home" / "builds" / "llama-server") == []
    # --no-smoke installs the same build (for builds meant for another machine)
    ok(cli("install", "llama-server", "--no-smoke"))


def test_missing_library_link_fails_smoke_check(
    cli: Cli, mirror: MirrorServer, mirror_root: Path
) -> None:
    from tests.support import Entry

    broken = make_tar([Entry("bin/llama-server", server_script("b1"), mode=0o755)])
    publish(
        mirror_root, "ggml-org/llama.cpp", "b1", {"llama-b1-bin-ubuntu-vulkan-x64.tar.gz": broken}
    )
    result = cli("install", "llama-server")
    assert result.code == 1 and "libggml.so.0: cannot open shared object file" in result.err


def test_executable_missing_from_archive(cli: Cli, mirror: MirrorServer, mirror_root: Path) -> None:
    from tests.support import Entry

    publish(
        mirror_root,
        "ggml-org/llama.cpp",
        "b1",
        {"llama-b1-bin-ubuntu-vulkan-x64.tar.gz": make_tar([Entry("README", b"hi")])},
    )
    result = cli("install", "llama-server")
    assert result.code == 1
    assert error_line(result) == (
        "error: llama-server not found in llama-b1-bin-ubuntu-vulkan-x64.tar.gz"
    )


@pytest.mark.parametrize(
    ("args", "message", "code"),
    [
        (("install", "nope"), 'unknown component "nope"; known components: llama-server', 2),
        (("install", "llama-server", "--variant", "tpu"), 'has no variant "tpu"', 2),
        (  # typed right, but the release has none: the world's answer
            ("install", "llama-server", "--variant", "metal"),
            "no metal build of llama-server is published for linux-x64",
            1,
        ),
        (("activate", "llama-server@b1-cpu"), "llama-server@b1-cpu is not installed", 2),
        (("uninstall", "llama-server"), "is not a build", 2),
        (
            ("install", "llama-server", "--dry-run", "--platform", "plan9-x64"),
            "unknown platform",
            2,
        ),
    ],
)
def test_bad_install_input(
    cli: Cli,
    mirror: MirrorServer,
    mirror_root: Path,
    args: tuple[str, ...],
    message: str,
    code: int,
) -> None:
    """What was typed wrong is 2, what the world lacks is 1 (issue 33)."""
    publish_llama(mirror_root, "b1")
    result = cli(*args)
    assert message in error_line(result, code)


def test_catalog(cli: Cli, mirror: MirrorServer, mirror_root: Path) -> None:
    publish_llama(mirror_root, "b1")
    ok(cli("install", "llama-server"))
    rows = json.loads(ok(cli("--json", "catalog")).out)
    llama = rows[0]
    assert (llama["id"], llama["suggested"], llama["source"]) == (
        "llama-server",
        "vulkan",
        "github:ggml-org/llama.cpp",
    )
    assert llama["why"] == "AMD adapter (AMD Radeon RX 7900 XTX)"
    assert llama["installed"] == ["llama-server@b1-vulkan"]
    assert llama["activated"] == "llama-server@b1-vulkan"
    assert {v["id"]: v["available"] for v in llama["variants"]}["metal"] is False
    assert [r["id"] for r in rows] == [
        "llama-server",
        "llama-swap",
        "sd-server",
        "upscaler",
        "vllm",
    ]
    assert "vllm" in ok(cli("catalog")).out


def test_offline_without_cache_fails_in_one_line(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BACKENDMGR_OFFLINE", "1")
    result = cli("install", "llama-server")
    assert result.code == 1
    assert "BACKENDMGR_OFFLINE is set" in error_line(result)


def test_checksum_file_verifies_when_no_digest_is_published(
    cli: Cli, mirror: MirrorServer, mirror_root: Path, config_path: Path
) -> None:
    folder = config_path.parent / "manifests"
    folder.mkdir(parents=True)
    (folder / "tool.yaml").write_text(
        "id: tool\nkind: custom\nsource: {type: github, repo: me/tool}\n"
        "exe: {default: tool}\nbare: true\nchecksums: 'SHA256SUMS'\n"
        "variants: [{id: cpu, assets: {linux-x64: ['tool-linux-x64']}}]\n"
    )
    script = b"#!/bin/sh\necho tool 1.0\n"
    good = hashlib.sha256(script).hexdigest()
    publish(
        mirror_root,
        "me/tool",
        "v1",
        {"tool-linux-x64": script, "SHA256SUMS": f"{good}  tool-linux-x64\n".encode()},
    )
    publish(
        mirror_root,
        "me/tool",
        "v2",
        {"tool-linux-x64": script, "SHA256SUMS": f"{'0' * 64}  tool-linux-x64\n".encode()},
        published_at="2099-01-01T00:00:00Z",
    )
    strip_digests(mirror)
    bad = cli("install", "tool", "v2")
    assert bad.code == 1 and "(checksums: SHA256SUMS); nothing was installed" in error_line(bad)
    data = json.loads(ok(cli("--json", "install", "tool", "v1")).out)
    assert data["assets"][0]["verified_by"] == "checksums"
    assert data["assets"][0]["sha256"] == good
    # a custom kind serves no class: registered as a managed row without ★
    assert [(r[0], r[3]) for r in registry(cli)] == [("tool", False), ("tool@v1-cpu", False)]
