"""``backendmgr service``: the unit (launchd agent) is built from data, quoted for its reader,
and accepted by ``systemd-analyze verify`` where that tool runs."""

from __future__ import annotations

import json
import os
import plistlib
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from backendmgr.errors import InvalidInput
from backendmgr.swap.unit import ServiceSpec, agent_plist, systemd_quote, systemd_unit
from tests.support.cli import CliResult
from tests.support.swap import model_setup, needs_swap, ok, which_systemd_analyze

HOSTILE = 'a b/c%d$e"f\\g'


def spec(tmp_path: Path) -> ServiceSpec:
    folder = tmp_path / HOSTILE
    return ServiceSpec.for_paths(
        folder / "config.yaml",
        folder / "home",
        "127.0.0.1:8080",
        public=False,
        log=folder / "home" / "swap" / "llama-swap.log",
        path="/usr/bin:/bin",
    )


def test_systemd_quoting() -> None:
    assert systemd_quote(HOSTILE) == '"a b/c%%d$$e\\"f\\\\g"'
    for bad in ("a\nExecStartPre=/bin/rm -rf ~", "a\rb", "a\x00b"):
        with pytest.raises(InvalidInput, match="control character"):
            systemd_quote(bad)


def unit_values(text: str, directive: str) -> list[list[str]]:
    """Each ``directive=`` line of a unit read back as systemd documents it (systemd.syntax(7),
    systemd.unit(5), systemd.exec(5)): ``%%`` is a ``%`` (no other specifier may appear), then
    the value is split into words, a double-quoted word losing its quotes and its C escapes
    (``\\\\``, ``\\"``) unescaped. No ``$`` rule: in ``Environment=`` it means nothing."""
    out = []
    for line in text.splitlines():
        if not line.startswith(f"{directive}="):
            continue
        value = line.split("=", 1)[1]
        assert "%" not in value.replace("%%", ""), f"an unexpanded specifier in {line}"
        value = value.replace("%%", "%")
        words: list[str] = []
        i = 0
        while i < len(value):
            if value[i] == " ":
                i += 1
                continue
            word, quoted = "", False
            while i < len(value) and (quoted or value[i] != " "):
                ch = value[i]
                if ch == '"':
                    quoted = not quoted
                elif ch == "\\":
                    i += 1
                    word += {"n": "\n", "t": "\t"}.get(value[i], value[i])
                else:
                    word += ch
                i += 1
            assert not quoted, f"an unclosed quote in {line}"
            words.append(word)
        out.append(words)
    return out


def test_path_with_dollar_round_trips_through_environment(tmp_path: Path) -> None:
    """``$`` means nothing in Environment= (systemd.exec(5)): written as is, read back as is;
    in ExecStart= it is doubled, as that directive expands variables."""
    path = '/opt/a$b/bin:/opt/$HOME/x y:/p%h/q:/q"uote\\d:/usr/bin'
    folder = tmp_path / "c$d"
    text = systemd_unit(
        ServiceSpec.for_paths(
            folder / "config.yaml",
            folder / "home",
            "127.0.0.1:8080",
            public=False,
            log=folder / "home" / "swap" / "llama-swap.log",
            path=path,
        )
    )
    assert unit_values(text, "Environment") == [[f"PATH={path}"]]
    assert "$$" not in next(line for line in text.splitlines() if line.startswith("Environment="))
    (argv,) = unit_values(text, "ExecStart")
    assert argv[argv.index("--config") + 1] == str(folder / "config.yaml").replace("$", "$$")
    if which_systemd_analyze():
        unit = tmp_path / "backendmgr-llama-swap.service"
        unit.write_text(text)
        done = subprocess.run(
            ["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0 and done.stderr.strip() == "", done.stderr


def test_the_agent_is_plist_data(tmp_path: Path) -> None:
    data = plistlib.loads(agent_plist(spec(tmp_path)))
    assert data["ProgramArguments"] == list(spec(tmp_path).argv)
    assert data["ProgramArguments"][:3] == [sys.executable, "-m", "backendmgr"]
    assert data["KeepAlive"] == {"Crashed": True}  # a refused config is no restart loop


@pytest.mark.skipif(not which_systemd_analyze(), reason="systemd-analyze is not installed")
def test_systemd_analyze_accepts_the_unit_and_refuses_a_broken_one(tmp_path: Path) -> None:
    unit = tmp_path / "backendmgr-llama-swap.service"
    unit.write_text(systemd_unit(spec(tmp_path)))
    done = subprocess.run(
        ["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip() == ""
    broken = tmp_path / "broken.service"
    broken.write_text(systemd_unit(spec(tmp_path)).replace('ExecStart="/', 'ExecStart="'))
    refused = subprocess.run(
        ["systemd-analyze", "verify", str(broken)], capture_output=True, text=True, timeout=60
    )
    assert refused.returncode != 0 or refused.stderr.strip()


@needs_swap
def test_service_install_writes_the_unit_and_uninstall_removes_it(
    tmp_path: Path,
    config_path: Path,
    with_swap: Path,
    cli: Callable[..., CliResult],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    model_setup(tmp_path, config_path)
    path = f"/opt/a$b/bin:{os.environ['PATH']}"
    monkeypatch.setenv("PATH", path)  # the service gets this PATH, "$" and all
    missing = cli("service", "start")
    assert missing.code == 1 and 'run "backendmgr service install"' in missing.err
    public = cli("service", "install", "--listen", "0.0.0.0:8080")
    assert public.code == 1 and "no authentication" in public.err
    ok(cli("activate", "llama-swap@v250-any"))

    done = json.loads(ok(cli("--json", "service", "install", "--listen", "127.0.0.1:8123")).out)
    unit = Path(done["file"])
    assert unit == tmp_path / "xdg" / "systemd" / "user" / "backendmgr-llama-swap.service"
    text = unit.read_text()
    exec_start = next(line for line in text.splitlines() if line.startswith("ExecStart="))
    assert exec_start.endswith('"up" "--listen" "127.0.0.1:8123"')
    assert f'"--config" "{config_path}"' in exec_start
    assert unit_values(text, "Environment") == [[f"PATH={path}"]]
    if which_systemd_analyze():
        verified = subprocess.run(
            ["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, timeout=60
        )
        assert verified.returncode == 0, verified.stderr
    seen = json.loads(ok(cli("--json", "status")).out)
    assert seen["service"] == str(unit)

    removed = ok(cli("service", "uninstall"))
    assert f"removed {unit}" in removed.out
    assert not unit.exists()
