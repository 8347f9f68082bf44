"""The backendmgr.fleet collection under real ``ansible-playbook`` (issue 23): three hosts on
this machine (local connection, each with its own home, config, models and mirror URL) fed by
loopback release mirrors, driven through ``ansible/rollout.yml`` as the README shows it.

The builds are stand-ins that serve: b100 and b101 answer ``verify``; b102 passes the install's
smoke check but exits at once when started on a model, so ``verify`` fails on it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from backendmgr.cli import main as cli_main
from backendmgr.mirror import MirrorServer
from tests.support import Entry, make_tar, publish, tree
from tests.support.ggufs import write_gguf
from tests.support.paths import ROOT
from tests.support.standins import SERVER_STANDIN

BIN = Path(sys.executable).parent
PLAYBOOK = ROOT / "ansible" / "rollout.yml"
VULKAN = "llama-{tag}-bin-ubuntu-vulkan-x64.tar.gz"
GPU = "AMD Radeon RX 7900 XTX"  # the vulkan variant
A, B, C = "llama-server@b100-vulkan", "llama-server@b101-vulkan", "llama-server@b102-vulkan"

BROKEN = r"""
import sys
if sys.argv[1:2] == ["--help"]:
    print("usage: llama-server [options]\n  --jinja")
    sys.exit(0)
if sys.argv[1:2] == ["--version"]:
    print("version: 102 (b102)")
    sys.exit(0)
print("ggml_vulkan: device lost while loading the model", file=sys.stderr)
sys.exit(1)
"""

pytestmark = pytest.mark.skipif(
    not (BIN / "ansible-playbook").is_file(), reason="ansible-core is not installed (test extra)"
)


def _release(root: Path, tag: str, script: str) -> None:
    entries = [
        Entry("build/bin/", kind="dir", mode=0o755),
        Entry("build/bin/llama-server", f"#!{sys.executable}\n{script}".encode(), mode=0o755),
        Entry("build/bin/LICENSE", b"MIT\n"),
    ]
    day = tag[-1]
    publish(
        root,
        "ggml-org/llama.cpp",
        tag,
        {VULKAN.format(tag=tag): make_tar(entries)},
        published_at=f"2026-09-0{day}T00:00:00Z",
    )


def _env(tmp: Path, record: Path) -> dict[str, str]:
    """The controller's environment: no user's backendmgr or Ansible settings, nothing from the
    network, every Ansible folder in ``tmp``."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("BACKENDMGR_", "ANSIBLE_")) and k not in ("GITHUB_TOKEN", "GH_TOKEN")
    }
    env.update(
        ANSIBLE_HOME=str(tmp / "ansible-home"),
        ANSIBLE_LOCAL_TEMP=str(tmp / "ansible-tmp"),
        ANSIBLE_REMOTE_TEMP=str(tmp / "ansible-remote-tmp"),
        ANSIBLE_COLLECTIONS_PATH=str(ROOT / "ansible"),
        ANSIBLE_COLLECTIONS_SCAN_SYS_PATH="false",
        ANSIBLE_CALLBACK_PLUGINS=str(Path(__file__).parent / "callback_plugins"),
        ANSIBLE_CALLBACKS_ENABLED="record",
        ANSIBLE_NOCOLOR="1",
        ANSIBLE_RETRY_FILES_ENABLED="false",
        ANSIBLE_PIPELINING="true",
        ANSIBLE_GALAXY_DISABLE_GPG_VERIFY="true",
        BACKENDMGR_TEST_RECORD=str(record),
        BACKENDMGR_GPU=GPU,
        PATH=f"{BIN}:{env.get('PATH', '')}",
    )
    return env


@dataclass
class Site:
    """The controller's side: the mirrors and the three locks, made once for the module."""

    mirror: MirrorServer
    tampered: MirrorServer  # serves other bytes for b101
    locks: dict[str, Path]  # A: b100*; B: b100, b101*; C: b100, b101, b102* (* activated)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    tmp = tmp_path_factory.mktemp("site")
    root = tmp / "mirror"
    _release(root, "b100", SERVER_STANDIN)
    _release(root, "b101", SERVER_STANDIN)
    _release(root, "b102", BROKEN)
    evil = tmp / "evil"
    shutil.copytree(root, evil)
    asset = evil / "ggml-org/llama.cpp/b101" / VULKAN.format(tag="b101")
    pwned = Entry("build/bin/llama-server", b"#!/bin/sh\necho pwned\n", mode=0o755)
    asset.write_bytes(make_tar([pwned]))
    mirror, tampered = MirrorServer(root).start(), MirrorServer(evil).start()
    for server in (mirror, tampered):
        server.handle_error = lambda request, client_address: None  # type: ignore[method-assign]
    flags = ["--home", str(tmp / "ref" / "home"), "--config", str(tmp / "ref" / "config.yaml")]
    locks = {name: tmp / f"{name}.lock" for name in "ABC"}
    with pytest.MonkeyPatch.context() as env:
        for name in [n for n in os.environ if n.startswith("BACKENDMGR_")]:
            env.delenv(name)
        env.setenv("BACKENDMGR_GITHUB_API", mirror.base_url)
        env.setenv("BACKENDMGR_GPU", GPU)
        for args in (
            ["install", "llama-server", "b100"],
            ["lock", "--output", str(locks["A"])],
            ["install", "llama-server", "b101", "--activate"],
            ["lock", "--output", str(locks["B"])],
            ["install", "llama-server", "b102", "--activate"],
            ["lock", "--output", str(locks["C"])],
        ):  # the controller's machine, in this process: its installs are not what is tested
            assert cli_main.main(["-q", *flags, *args]) == 0, args
    try:
        yield Site(mirror, tampered, locks)
    finally:
        mirror.stop()
        tampered.stop()


@dataclass
class Run:
    code: int
    out: str
    results: list[dict[str, object]]

    def tasks(self, host: str, task: str) -> list[dict[str, object]]:
        return [r for r in self.results if r["host"] == host and r["task"] == task]

    def sync(self, host: str) -> dict[str, object]:
        (found,) = self.tasks(host, SYNC)
        return found

    def hosts(self) -> set[str]:
        return {str(r["host"]) for r in self.results}


SYNC = "Sync the host to the new lock, keeping the lock of the builds it had"
VERIFY = "Verify that every model serves with the new builds"
BACK = "Sync the host back to the builds it had"
HOSTS = ("host1", "host2", "host3")


class Fleet:
    """Three hosts on this machine and the inventory that names them."""

    def __init__(self, tmp: Path, site: Site) -> None:
        self.tmp, self.site = tmp, site
        self.at: dict[str, str | None] = dict.fromkeys(HOSTS)  # the lock each host was synced to
        self.inventory = tmp / "inventory.yml"
        self.mirror_of = dict.fromkeys(HOSTS, site.mirror.base_url)
        for host in HOSTS:
            models = tmp / host / "models"
            write_gguf(models / "chat.gguf", "qwen3", layers=4, ctx=4096)
            cfg = self.config(host)
            cfg.parent.mkdir(parents=True)
            cfg.write_text(json.dumps({"models_dirs": [str(models)]}) + "\n")
        self.write_inventory()

    def home(self, host: str) -> Path:
        return self.tmp / host / "home"

    def config(self, host: str) -> Path:
        return self.tmp / host / "cfg" / "config.yaml"

    def write_inventory(self) -> None:
        hosts = {
            host: {
                "ansible_connection": "local",
                "ansible_python_interpreter": sys.executable,
                "backendmgr_home": str(self.home(host)),
                "backendmgr_config": str(self.config(host)),
                "backendmgr_github_api": self.mirror_of[host],
            }
            for host in HOSTS
        }
        group = {"hosts": hosts, "vars": {"backendmgr_executable": str(BIN / "backendmgr")}}
        inventory = {"backendmgr": group}
        self.inventory.write_text(json.dumps(inventory, indent=1))

    def play(self, lock: str, *extra: str, playbook: Path = PLAYBOOK) -> Run:
        record = self.tmp / "record.jsonl"
        record.unlink(missing_ok=True)
        done = subprocess.run(
            [
                str(BIN / "ansible-playbook"),
                "-i",
                str(self.inventory),
                str(playbook),
                "-e",
                f"backendmgr_lock_src={self.site.locks[lock]}",
                "--diff",
                *extra,
            ],
            cwd=self.tmp,
            env=_env(self.tmp, record),
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        lines = record.read_text().splitlines() if record.exists() else []
        results = [json.loads(x) for x in lines]
        assert "Traceback" not in done.stdout + done.stderr, done.stdout + done.stderr
        return Run(done.returncode, done.stdout + done.stderr, results)

    def ok(self, lock: str, *extra: str) -> Run:
        run = self.play(lock, *extra)
        assert run.code == 0, run.out
        if "--check" not in extra:
            self.at = dict.fromkeys(HOSTS, lock)
        return run

    def settle(self, lock: str) -> None:
        """Every host synced to ``lock`` (already, when an earlier test left them there)."""
        if set(self.at.values()) != {lock}:
            self.ok(lock)

    def builds(self, host: str) -> dict[str, bool]:
        done = subprocess.run(
            [
                str(BIN / "backendmgr"),
                "--json",
                "--home",
                str(self.home(host)),
                "--config",
                str(self.config(host)),
                "list",
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        return {row["id"]: row["activated"] for row in json.loads(done.stdout)}

    def state(self, host: str) -> tuple[list[str], str, str]:
        """Everything a run that changes nothing must leave as it was."""
        home, cfg = self.home(host), self.config(host).parent
        out = cfg / "llama-swap.yaml"
        return (
            # the manifests' kept parses and the parsed config's snapshot are input caches that
            # any read may (re)build
            [p for p in tree(home) if not p.startswith("cache/manifests")] if home.exists() else [],
            "\n".join(p for p in tree(cfg) if not p.endswith(".parsed.json"))
            + self.config(host).read_text(),
            out.read_text() if out.exists() else "",
        )


@pytest.fixture(scope="module")
def shared_fleet(tmp_path_factory: pytest.TempPathFactory, site: Site) -> Fleet:
    """One fleet for the module: each test starts where the one before left it (the rollouts
    build on a synced fleet), and says which state it needs."""
    return Fleet(tmp_path_factory.mktemp("fleet"), site)


@pytest.fixture
def fleet(shared_fleet: Fleet) -> Fleet:
    return shared_fleet


@pytest.fixture
def fresh_fleet(shared_fleet: Fleet, tmp_path: Path, site: Site) -> Fleet:
    """The module's fleet while nothing ran on it yet, else a new one."""
    if set(shared_fleet.at.values()) == {None}:
        return shared_fleet
    return Fleet(tmp_path, site)


def test_check_mode_predicts_the_first_run_and_a_second_run_changes_nothing(
    fresh_fleet: Fleet,
) -> None:
    fleet = fresh_fleet
    before = {h: fleet.state(h) for h in HOSTS}
    check = fleet.ok("A", "--check")
    assert {h: fleet.state(h) for h in HOSTS} == before  # nothing written, not even the lock
    for host in HOSTS:
        predicted = check.sync(host)
        assert predicted["status"] == "ok" and predicted["changed"] is True
        assert predicted["result"]["install"] == [A]  # type: ignore[index]
        assert predicted["result"]["builds"] == {A: True}  # type: ignore[index]
        (skipped,) = check.tasks(host, VERIFY)  # verify starts servers: not in check mode
        assert skipped["status"] == "skipped"
    assert check.out.count(f"+{A} (activated)") == 3  # diff mode

    first = fleet.ok("A")
    for host in HOSTS:
        done = first.sync(host)
        assert done["changed"] is True
        for key in ("install", "activate", "builds", "added", "activated"):
            assert done["result"][key] == check.sync(host)["result"][key]  # type: ignore[index]
        (verified,) = first.tasks(host, VERIFY)
        assert verified["status"] == "ok" and verified["result"]["verified"] == 1  # type: ignore[index]
        lock = fleet.config(host).parent / "backendmgr.lock"
        assert lock.read_bytes() == fleet.site.locks["A"].read_bytes()
        previous = lock.with_name("backendmgr.lock.previous")
        assert "builds: []" in previous.read_text()  # what the host had: nothing
    assert first.out.count("changed=1") == 3
    assert fleet.builds("host2") == {A: True}  # as backendmgr itself lists it

    settled = {h: fleet.state(h) for h in HOSTS}
    second = fleet.ok("A")
    assert [r for r in second.results if r["changed"]] == []
    assert "changed=0" in second.out and "changed=1" not in second.out
    for host in HOSTS:
        assert second.sync(host)["result"]["install"] == []  # type: ignore[index]
        (verify,) = second.tasks(host, VERIFY)  # nothing new to verify
        assert verify["status"] == "skipped"
        assert fleet.state(host) == settled[host]  # the same builds, config and llama-swap file


def test_a_host_whose_mirror_serves_tampered_bytes_fails_alone(fleet: Fleet) -> None:
    fleet.settle("A")
    fleet.mirror_of["host3"] = fleet.site.tampered.base_url
    fleet.write_inventory()
    try:
        run = fleet.play("B")
    finally:
        fleet.mirror_of["host3"] = fleet.site.mirror.base_url
        fleet.write_inventory()
    assert run.code != 0
    fleet.at.update(host1="B", host2="B")
    for host in ("host1", "host2"):
        assert run.sync(host)["changed"] is True
        assert run.sync(host)["result"]["builds"] == {A: False, B: True}  # type: ignore[index]
    failed = run.sync("host3")
    assert failed["status"] == "failed" and failed["changed"] is False
    msg = str(failed["result"]["msg"])  # type: ignore[index]
    assert "\n" not in msg and msg.startswith(f"{B}: ") and "nothing was installed" in msg
    assert fleet.builds("host3") == {A: True}  # the previous build, still activated
    lock = fleet.config("host3").parent / "backendmgr.lock"
    assert lock.read_bytes() == fleet.site.locks["A"].read_bytes()  # put back as it was
    assert list(fleet.home("host3").rglob("*.part")) == []
    assert not (fleet.home("host3") / "builds" / "llama-server" / "b101-vulkan").exists()
    (back,) = run.tasks("host3", BACK)
    assert back["status"] == "ok" and back["changed"] is False  # nothing to undo
    assert "host3 was synced back to" in run.out


def test_a_lock_that_fails_verify_rolls_the_first_host_back_and_stops(fleet: Fleet) -> None:
    if fleet.at["host1"] is None:
        fleet.settle("A")
    had = fleet.builds("host1")
    untouched = {h: fleet.state(h) for h in ("host2", "host3")}
    run = fleet.play("C")
    assert run.code != 0
    assert run.hosts() == {"host1"}  # the rollout stopped before the other hosts
    assert C in run.sync("host1")["result"]["install"]  # type: ignore[operator]
    (verify,) = run.tasks("host1", VERIFY)
    assert verify["status"] == "failed"
    msg = str(verify["result"]["msg"])  # type: ignore[index]
    assert msg.startswith("1 of 1 models failed verification: chat: ") and "\n" not in msg
    (back,) = run.tasks("host1", BACK)
    assert back["status"] == "ok" and back["changed"] is True
    assert C in back["result"]["remove"]  # type: ignore[operator]
    assert back["result"]["activate"] == [b for b, on in had.items() if on]  # type: ignore[index]
    assert fleet.builds("host1") == had
    assert not (fleet.home("host1") / "builds" / "llama-server" / "b102-vulkan").exists()
    assert "host1 was synced back to" in run.out
    assert {h: fleet.state(h) for h in ("host2", "host3")} == untouched


def _task(
    title: str, module: str, args: dict[str, object], check: bool = False
) -> dict[str, object]:
    task: dict[str, object] = {"name": title, f"backendmgr.fleet.{module}": args}
    if check:
        task["check_mode"] = True
    return {**task, "ignore_errors": True}


def test_build_and_model_modules_are_idempotent_and_check_mode_predicts(
    tmp_path: Path, site: Site
) -> None:
    fleet = Fleet(tmp_path, site)
    b100: dict[str, object] = {"component": "llama-server", "version": "b100", "variant": "vulkan"}
    b101 = {**b100, "version": "b101"}
    model: dict[str, object] = {
        "name": "chat",
        "backend": B,
        "settings": {"ctx": 2048, "unlisted": True},
    }
    tasks = [
        _task("b100 present?", "backendmgr_build", b100, check=True),
        _task("b100 present", "backendmgr_build", b100),
        _task("b100 present again", "backendmgr_build", b100),
        _task("b101 activated?", "backendmgr_build", {**b101, "state": "activated"}, check=True),
        _task("b101 activated", "backendmgr_build", {**b101, "state": "activated"}),
        _task("b101 absent, refused", "backendmgr_build", {**b101, "state": "absent"}),
        _task("b100 absent", "backendmgr_build", {**b100, "state": "absent"}),
        _task("chat pinned?", "backendmgr_model", model, check=True),
        _task("chat pinned", "backendmgr_model", model),
        _task("chat pinned again", "backendmgr_model", model),
        _task("chat pinned again?", "backendmgr_model", model, check=True),
        _task("no backendmgr", "backendmgr_sync", {"executable": str(tmp_path / "nope")}),
    ]
    defaults = {
        "executable": "{{ backendmgr_executable }}",
        "home": "{{ backendmgr_home }}",
        "config": "{{ backendmgr_config }}",
        "github_api": "{{ backendmgr_github_api }}",
    }
    play = {
        "hosts": "host1",
        "gather_facts": False,
        "module_defaults": {"group/backendmgr.fleet.all": defaults},
        "tasks": tasks,
    }
    playbook = tmp_path / "modules.yml"
    playbook.write_text(json.dumps([play], indent=1))  # JSON is YAML: nothing built from text
    run = fleet.play("A", playbook=playbook)
    assert run.code == 0, run.out
    got = {str(r["task"]): r for r in run.results}

    def changed(task: str) -> bool:
        assert got[task]["status"] == "ok", got[task]
        return bool(got[task]["changed"])

    assert changed("b100 present?") and changed("b100 present")
    assert got["b100 present?"]["result"]["builds"] == {A: True}  # type: ignore[index]
    assert not changed("b100 present again")
    assert changed("b101 activated?") and changed("b101 activated")
    predicted = got["b101 activated?"]["result"]["builds"]  # type: ignore[index]
    assert predicted == got["b101 activated"]["result"]["builds"] == {A: False, B: True}  # type: ignore[index]
    refused = got["b101 absent, refused"]
    assert refused["status"] == "failed" and refused["changed"] is False
    assert "activate another build first" in str(refused["result"]["msg"])  # type: ignore[index]
    assert changed("b100 absent") and got["b100 absent"]["result"]["removed"] == [A]  # type: ignore[index]
    assert changed("chat pinned?") and changed("chat pinned")
    after = got["chat pinned"]["result"]["after"]  # type: ignore[index]
    assert after == {"backend": B, "ctx": 2048, "unlisted": True}
    assert got["chat pinned?"]["result"]["after"] == after  # type: ignore[index]
    assert not changed("chat pinned again") and not changed("chat pinned again?")
    missing = got["no backendmgr"]
    assert missing["status"] == "failed"
    assert str(missing["result"]["msg"]) == (  # type: ignore[index]
        f"{tmp_path / 'nope'} is not an executable file; set the executable option to "
        "backendmgr's path"
    )
    assert fleet.builds("host1") == {B: True}


def test_ansible_doc_renders_every_module(tmp_path: Path) -> None:
    names = [f"backendmgr.fleet.backendmgr_{n}" for n in ("sync", "build", "model", "verify")]
    done = subprocess.run(
        [str(BIN / "ansible-doc"), *names],
        env=_env(tmp_path, tmp_path / "record.jsonl"),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0 and "ERROR" not in done.stderr, done
    for name in names:
        assert f"MODULE {name}" in done.stdout
    assert done.stdout.count("EXAMPLES") == 4 and done.stdout.count("RETURN VALUES") == 4
    assert done.stdout.count("github_api") >= 4


def _files(root: Path, skip: tuple[str, ...]) -> dict[str, tuple[int, int]]:
    """Every file under ``root`` but the ``skip`` folders: path -> (size, mtime)."""
    found = {}
    for path in root.rglob("*"):
        rel = str(path.relative_to(root))
        if path.is_file() and not rel.startswith(skip):
            info = path.stat()
            found[rel] = (info.st_size, info.st_mtime_ns)
    return found


def _play(fleet: Fleet, name: str, tasks: list[dict[str, object]]) -> Run:
    defaults = {
        "executable": "{{ backendmgr_executable }}",
        "home": "{{ backendmgr_home }}",
        "config": "{{ backendmgr_config }}",
        "github_api": "{{ backendmgr_github_api }}",
    }
    play = {
        "hosts": "host1",
        "gather_facts": False,
        "module_defaults": {"group/backendmgr.fleet.all": defaults},
        "tasks": tasks,
    }
    playbook = fleet.tmp / f"{name}.yml"
    playbook.write_text(json.dumps([play], indent=1))  # JSON is YAML: nothing built from text
    run = fleet.play("A", playbook=playbook)
    assert run.code == 0, run.out
    return run


def test_module_values_that_look_like_options_are_values_and_check_mode_asks(
    tmp_path: Path, site: Site
) -> None:
    """Issue 29: every task value that starts with "-" reaches backendmgr after "--" (the
    host's own config is the only file written, no option is read), and check mode runs the
    real command's --dry-run: for every module, a check and a real run of the same task report
    the same ``changed``, however ``env`` and ``device`` are written."""
    fleet = Fleet(tmp_path, site)
    evil = tmp_path / "evil"
    lock = str(site.locks["A"])
    b100: dict[str, object] = {"component": "llama-server", "version": "b100", "variant": "vulkan"}
    pairs: list[tuple[str, str, dict[str, object], bool]] = [  # title, module, args, changed
        ("sync", "backendmgr_sync", {"lock": lock}, True),
        ("sync again", "backendmgr_sync", {"lock": lock}, False),
        ("b100 present", "backendmgr_build", b100, False),
        ("b100 activated", "backendmgr_build", {**b100, "state": "activated"}, False),
        (
            "env, device",
            "backendmgr_model",
            {"settings": {"env": "A=1 B=2", "device": "0,1"}},
            True,
        ),
        (
            "the same, as lists",
            "backendmgr_model",
            {"settings": {"env": ["A=1", "B=2"], "device": [0, 1]}},
            False,
        ),
        (
            "the same, spaced",
            "backendmgr_model",
            {"settings": {"env": "A=1  B=2", "device": "0, 1"}},
            False,
        ),
        ("pin", "backendmgr_model", {"backend": A, "unset": ["ctx"]}, True),
        ("pin again", "backendmgr_model", {"backend": A, "unset": ["ctx"]}, False),
    ]
    hostile: list[tuple[str, str, dict[str, object]]] = [  # each value would be an option
        (
            "model --config",
            "backendmgr_model",
            {"name": f"--config={evil}/config.yaml", "settings": {"ctx": 4096}},
        ),
        (
            "model --home",
            "backendmgr_model",
            {"name": f"--home={evil}/home", "settings": {"ctx": 1}},
        ),
        ("model --help", "backendmgr_model", {"name": "--help", "settings": {"ctx": 2}}),
        (
            "key --config",
            "backendmgr_model",
            {"name": "chat", "settings": {"--config": f"{evil}/c.yaml"}},
        ),
        (
            "unset --config",
            "backendmgr_model",
            {"name": "chat", "unset": [f"--config={evil}/c.yaml"]},
        ),
        ("verify --repair", "backendmgr_verify", {"models": ["--repair"]}),
        ("build --home", "backendmgr_build", {"component": f"--home={evil}/home"}),
        ("sync --home", "backendmgr_sync", {"lock": f"--home={evil}/home"}),
    ]
    tasks = []
    for title, module, args, _ in pairs:
        args = {"name": "chat", **args} if module == "backendmgr_model" else args
        tasks += [_task(f"{title}?", module, args, check=True), _task(title, module, args)]
    tasks += [_task(title, module, args) for title, module, args in hostile]
    skip = ("ansible", "record.jsonl", "values.yml", "host1/home")
    before = _files(tmp_path, skip)
    run = _play(fleet, "values", tasks)
    got = {str(r["task"]): r for r in run.results}

    for title, _module, _, changed in pairs:
        check, real = got[f"{title}?"], got[title]
        assert check["status"] == real["status"] == "ok", (check, real)
        assert check["changed"] is real["changed"] is changed, (title, check, real)
    assert got["pin?"]["result"]["after"] == got["pin"]["result"]["after"]  # type: ignore[index]
    assert got["pin"]["result"]["after"] == {"backend": A, "device": "0,1", "env": ["A=1", "B=2"]}  # type: ignore[index]

    for title in ("model --config", "model --home", "model --help"):  # stored as model ids
        assert got[title]["status"] == "ok" and got[title]["changed"] is True, got[title]
    for title in (
        "key --config",
        "unset --config",
        "verify --repair",
        "build --home",
        "sync --home",
    ):
        assert got[title]["status"] == "failed", got[title]
        assert "printed no JSON" not in str(got[title]["result"]["msg"])  # type: ignore[index]
    assert 'unknown key "--config"' in str(got["key --config"]["result"]["msg"])  # type: ignore[index]
    for title, _, _ in hostile:  # every value after "--"
        for argv in got[title]["result"]["commands"]:  # type: ignore[index]
            values = [a for a in argv if "evil" in a or a in ("--help", "--repair")]
            assert all(argv.index(v) > argv.index("--") for v in values), argv

    assert not evil.exists()
    changed = {p for p, stamp in _files(tmp_path, skip).items() if before.get(p) != stamp}
    assert changed <= {
        "host1/cfg/config.yaml",
        "host1/cfg/config.yaml.lock",
        "host1/cfg/.config.yaml.parsed.json",  # the parsed snapshot, an input cache
        "host1/cfg/llama-swap.yaml",
    }
    assert "host1/cfg/config.yaml" in changed
    stored = json.loads(
        subprocess.run(
            [
                str(BIN / "backendmgr"),
                "--json",
                "--config",
                str(fleet.config("host1")),
                "config",
                "show",
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout
    )["settings"]["models"]
    assert sorted(stored) == sorted(
        ["chat", f"--config={evil}/config.yaml", f"--home={evil}/home", "--help"]
    )
    assert stored["chat"]["backend"] == A  # verify --repair never ran a repair


def test_a_fresh_host_named_config_file_checks_and_diffs(tmp_path: Path, site: Site) -> None:
    """The README's first step on a host whose ``backendmgr_config`` names a file not made yet:
    check mode reads it as an empty config (as backendmgr does without --config) and writes
    nothing."""
    fleet = Fleet(tmp_path, site)
    missing = tmp_path / "fresh" / "cfg" / "config.yaml"
    run = fleet.ok(
        "A",
        "--check",
        "--limit",
        "host1",
        "-e",
        f"backendmgr_config={missing}",
    )
    predicted = run.sync("host1")
    assert predicted["status"] == "ok" and predicted["changed"] is True, predicted
    assert predicted["result"]["install"] == [A]  # type: ignore[index]
    assert f"+{A} (activated)" in run.out
    assert not missing.parent.exists()
