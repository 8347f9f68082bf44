"""``verify`` runs what llama-swap runs (issue 28 point 3): the real llama-swap starts every
entry of a generated config, and so does ``verify``; a stand-in server notes its argv and
environment each time, and both records must be equal (the port aside, each picks its own).

The entries use ``${PORT}``, ``${MODEL_ID}``, ``${env.X}``, declared macros, quotes,
backslashes, ``$\\{foo}`` and comment lines, through ``extra_args``, ``env`` and the
``llama_swap`` passthrough's ``cmd``. A second test feeds a hand-written file (every scalar
double-quoted) straight to :func:`expand` and to llama-swap, for values the emitter of this
branch may not write yet."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest

from backendmgr.emit.expand import expand
from tests.support.ggufs import write_gguf
from tests.support.standins import SERVER_STANDIN, python_exe
from tests.support.swap import SWAP_BIN, free_port, free_start_port, needs_swap, wait_for

pytestmark = needs_swap
MIB = 1 << 20
X_VALUE = "x value $dollar"  # the emitter of this branch single-quotes env items

# Before serving, the stand-in notes what it was started with in RECORDS (baked in: llama-swap
# and verify give it different environments).
RECORDER = """
import json, os, sys
_rec = os.path.join(RECORDS, f"{os.getpid()}.json")
with open(_rec + ".tmp", "w") as _fh:
    json.dump({"argv": sys.argv[1:], "env": dict(os.environ)}, _fh)
os.replace(_rec + ".tmp", _rec)
"""


def recorder(path: Path, records: Path) -> Path:
    records.mkdir(parents=True, exist_ok=True)
    return python_exe(path, f"RECORDS = {str(records)!r}\n{RECORDER}\n{SERVER_STANDIN}")


def taken(records: Path) -> list[dict[str, Any]]:
    """The serving starts recorded so far (not the capability probes), emptied for the next
    round."""
    out = []
    for path in sorted(records.glob("*.json")):
        record = json.loads(path.read_text())
        if "--port" in record["argv"]:
            out.append(record)
        path.unlink()
    return out


def port_of(argv: list[str]) -> str:
    return argv[argv.index("--port") + 1]


def shown(record: dict[str, Any], keys: set[str]) -> tuple[list[str], dict[str, str]]:
    """The argv and the entry's variables with this start's port written as <PORT>."""
    port = re.compile(rf"(?<!\d){port_of(record['argv'])}(?!\d)")
    argv = [port.sub("<PORT>", a) for a in record["argv"]]
    env = {k: port.sub("<PORT>", record["env"].get(k, "<unset>")) for k in keys}
    return argv, env


class Swap:
    def __init__(self, config: Path, env: dict[str, str]) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen(
            [str(SWAP_BIN), "-config", str(config), "-listen", f"127.0.0.1:{self.port}"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )

    def models(self) -> set[str]:
        def served() -> dict[str, Any] | None:
            if self.proc.poll() is not None:
                raise AssertionError(f"llama-swap refused the file: {self.proc.communicate()[1]}")
            try:
                answer = httpx.get(f"{self.url}/v1/models", timeout=1, trust_env=False)
            except httpx.HTTPError:
                return None
            return answer.json() if answer.status_code == 200 else None

        data = wait_for(served, timeout=20, what="llama-swap to load")
        return {m["id"] for m in data["data"]}

    def ask(self, model: str) -> None:
        """One chat request to ``model``: llama-swap starts its server for it."""
        answer = httpx.post(
            f"{self.url}/v1/chat/completions",
            json={"model": model, "messages": [{"role": "user", "content": "hi"}]},
            timeout=60,
            trust_env=False,
        )
        assert answer.status_code == 200, answer.text
        httpx.get(f"{self.url}/unload", timeout=30, trust_env=False)  # the next starts afresh

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(15)


BETA_CMD = r"""# the recorder, from a passthrough cmd
{server} \
  --port ${{PORT}} \
  # a comment line: ${{foo}} here is no macro
  --who ${{MODEL_ID}} --say "${{greeting}}" --lit $\{{foo}} --lit2 '$'"{{bar}}" \
  --back "a\\b" 'single \ kept' --mine ${{mine}} --from-env ${{fromenv}}
    # an indented comment
  --last"""


def test_verify_starts_what_llama_swap_starts(
    tmp_path: Path, config_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.support.cli import run_in_process

    monkeypatch.setenv("BM_TEST_X", X_VALUE)
    monkeypatch.setenv("BACKENDMGR_VRAM_GB", "24")
    records = tmp_path / "records"
    server = recorder(tmp_path / "bin" / "llama-server", records)
    models = tmp_path / "models"
    write_gguf(models / "alpha.gguf", "qwen3", layers=4, ctx=8192, size_bytes=MIB)
    write_gguf(models / "beta.gguf", "qwen3", layers=4, ctx=8192, size_bytes=MIB)
    alpha_args = (
        "--alias ${MODEL_ID} --q 'a b' \"c\\\\d\" back\\\\slash $\\{foo} "
        '"--home=${env.BM_TEST_X}" --g ${greeting}'
    )
    settings = {
        "models_dirs": [str(models)],
        "backends": [{"id": "rec", "kind": "llama", "path": str(server)}],
        "models": {
            "alpha": {
                "extra_args": alpha_args,
                "env": ["P=${PORT}", "M=${MODEL_ID}", "E=${env.BM_TEST_X}", "G=${greeting}"],
            },
            "beta": {
                "llama_swap": {
                    "cmd": BETA_CMD.format(server=server),
                    "env": ["Q=${PORT}:${mine}", "R=a\\b"],
                    "macros": {"mine": "m-${MODEL_ID}", "fromenv": "${env.BM_TEST_X}"},
                }
            },
        },
        "llama_swap": {"startPort": free_start_port(), "macros": {"greeting": "hello world"}},
    }
    config_path.parent.mkdir(parents=True, exist_ok=True)
    config_path.write_text(json.dumps(settings))
    generated = run_in_process("generate")
    assert generated.code == 0, generated.err
    document = config_path.parent / "llama-swap.yaml"
    swap = Swap(document, dict(os.environ))
    try:
        assert swap.models() == {"alpha", "beta"}
        for model, keys in (("alpha", {"P", "M", "E", "G"}), ("beta", {"Q", "R"})):
            verified = run_in_process("verify", model)
            assert verified.code == 0, verified.out + verified.err
            (by_verify,) = taken(records)
            swap.ask(model)
            (by_swap,) = taken(records)
            assert shown(by_verify, keys) == shown(by_swap, keys), model
    finally:
        swap.stop()
    beta, _ = shown(by_verify, set())  # the last: the escapes did arrive
    assert "--who beta --say hello world --lit ${foo} --lit2 ${bar}" in " ".join(beta)
    tail = ["--back", "a\\b", "single \\ kept", "--mine", "m-beta", "--from-env"]
    assert beta[-10:] == [*tail, *X_VALUE.split(), "--last"]


HOSTILE_Y = "back\\slash \"dq\" 'sq' $HOME `tick` #hash: colon"


def _write_swap_file(path: Path, port: int, models: dict[str, dict[str, Any]], **top: Any) -> None:
    """Every scalar double-quoted (JSON is YAML): what the emitter does for ``${env.``."""
    path.write_text(json.dumps({"startPort": port, **top, "models": models}, indent=1))


def test_expand_agrees_with_llama_swap_on_a_double_quoted_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BM_TEST_Y", HOSTILE_Y)
    records = tmp_path / "records"
    server = recorder(tmp_path / "bin" / "srv", records)
    macros = {"g": "G ${MODEL_ID}", "n": 7, "yes": True}
    entries: dict[str, dict[str, Any]] = {
        "m1": {
            "cmd": f"{server} --port ${{PORT}} --y ${{env.BM_TEST_Y}} --n ${{n}} --b ${{yes}}",
            "env": ["Y=${env.BM_TEST_Y}", "P=${PORT}", "G=${g}", "L=${loc}"],
            "macros": {"loc": "${g}/${env.BM_TEST_Y}", "n": 8},
        },
        "m2": {
            "cmd": (
                f"# first line\n  {server} \\\n  --port \\\n  ${{PORT}} \\\n  # ${{nothing}}\n"
                '  "--y=${env.BM_TEST_Y}" $\\{lit} \'q \'\'r\' "s\\"t" u\\ v \\\n  --end'
            ),
            "env": ["PATH=/usr/bin:/bin", "Z=${MODEL_ID}=${n}"],
        },
    }
    config = tmp_path / "swap.yaml"
    _write_swap_file(config, free_start_port(), entries, macros=macros)
    swap = Swap(config, dict(os.environ))
    try:
        assert swap.models() == set(entries)
        for model, entry in entries.items():
            swap.ask(model)
            (record,) = taken(records)
            port = int(port_of(record["argv"]))
            argv, env = expand(
                model,
                entry["cmd"],
                entry["env"],
                port=port,
                environ=dict(os.environ),
                macros=macros,
                model_macros=entry.get("macros"),
            )
            assert record["argv"] == argv[1:], model
            keys = {item.partition("=")[0] for item in entry["env"]}
            assert {k: record["env"].get(k) for k in keys} == {k: env[k] for k in keys}, model
    finally:
        swap.stop()


@pytest.mark.parametrize(
    ("entry", "top"),
    [
        ({"cmd": "srv ${PORT} ${foo}"}, {}),
        ({"cmd": "srv", "env": ["A=1"]}, {}),  # the default proxy needs ${PORT} in cmd
        ({"cmd": "srv", "env": ["A=${PORT}"], "proxy": "http://127.0.0.1:9"}, {}),
        ({"cmd": "srv ${PORT}", "proxy": "http://127.0.0.1:${nope}"}, {}),
        ({"cmd": "srv ${PORT} ${env.BM_TEST_UNSET}"}, {}),
        ({"cmd": "srv ${PORT}\n# ${env.BM_TEST_UNSET}"}, {}),
        ({"cmd": "srv ${PORT}", "env": ["A=${bar}"]}, {}),
        ({"cmd": "srv ${PORT} ${x}", "macros": {"x": "${x}"}}, {}),
        ({"cmd": "srv ${PORT}"}, {"macros": {"MODEL_ID": "m"}}),
        ({"cmd": "srv ${PORT} ${env.BM_TEST_Y}"}, {}),  # a value that holds a macro
    ],
)
def test_what_expand_refuses_llama_swap_refuses_alike(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, entry: dict[str, Any], top: dict[str, Any]
) -> None:
    from backendmgr.emit.expand import ExpandError

    monkeypatch.setenv("BM_TEST_Y", "${nope}")
    monkeypatch.delenv("BM_TEST_UNSET", raising=False)
    with pytest.raises(ExpandError) as refused:
        expand(
            "m",
            entry["cmd"],
            entry.get("env", []),
            port=5800,
            environ=dict(os.environ),
            macros=top.get("macros"),
            model_macros=entry.get("macros"),
            proxy=entry.get("proxy"),
        )
    config = tmp_path / "swap.yaml"
    _write_swap_file(config, free_start_port(), {"m": entry}, **top)
    done = subprocess.run(
        [str(SWAP_BIN), "-config", str(config), "-listen", f"127.0.0.1:{free_port()}"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode != 0
    assert str(refused.value) in done.stdout + done.stderr


ALPHABET = "ab -'\"\\\n#${}\t\r\u3000\x85é="


def test_random_commands_split_as_llama_swap_splits_them(tmp_path: Path) -> None:
    """Twenty-four command tails drawn from quotes, backslashes, newlines, ``#``, ``$\\{``, Go's and
    Python's disagreeing white space: llama-swap's servers get what :func:`expand` says."""
    import random

    draw = random.Random(28)
    records = tmp_path / "records"
    server = recorder(tmp_path / "bin" / "srv", records)
    entries: dict[str, dict[str, Any]] = {}
    while len(entries) < 24:
        tail = "".join(draw.choice(ALPHABET) for _ in range(draw.randint(1, 24)))
        if "${" in tail:  # a macro: llama-swap would refuse the whole file
            continue
        port = free_port()  # ports counted up from startPort may meet a taken one
        entries[f"r{len(entries):02d}"] = {
            "cmd": f"{server} --port {port} --t {tail}",
            "proxy": f"http://127.0.0.1:{port}",
        }
    config = tmp_path / "swap.yaml"
    _write_swap_file(config, free_start_port(), entries)
    swap = Swap(config, dict(os.environ))
    try:
        assert swap.models() == set(entries)
        for model, entry in entries.items():
            swap.ask(model)
            (record,) = taken(records)
            environ = dict(os.environ)
            argv, _ = expand(model, entry["cmd"], [], port=1, environ=environ, proxy=entry["proxy"])
            assert record["argv"] == argv[1:], (model, entry["cmd"])
    finally:
        swap.stop()
