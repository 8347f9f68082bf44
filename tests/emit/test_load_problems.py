"""llama-swap's macro pass as :func:`backendmgr.emit.macros.load_problems` reads a document:
where a macro is left over (named by its path), what the global and a model's own macros and
``${PORT}`` replace first, and the values that hold no ``${`` at all, which no pass changes."""

from __future__ import annotations

from typing import Any

from backendmgr.emit.macros import load_problems


def _model(
    body: dict[str, Any], macros: Any = None, **top: Any
) -> tuple[list[str], dict[str, str]]:
    return load_problems({"macros": macros, **top, "models": {"m": body}})


def test_a_macro_left_anywhere_in_a_model_is_named_by_its_path() -> None:
    cmd = "run --port ${PORT}"
    assert _model({"cmd": cmd, "metadata": {"a": 1, "b": ["x", "${foo}"]}}) == (
        [],
        {"m": "metadata.b.1 holds unknown macro '${foo}'"},
    )
    assert _model({"cmd": cmd, "env": ["A=1"], "aliases": ["${bar}"]})[1] == {
        "m": "aliases.0 holds unknown macro '${bar}'"
    }
    assert _model({"cmd": cmd + " ${x}"})[1] == {"m": "cmd holds unknown macro '${x}'"}
    assert _model({"cmd": cmd, "ttl": 5, "metadata": {"n": None, "f": 1.5}}) == ([], {})


def test_macros_are_replaced_before_anything_is_left_over() -> None:
    cmd = "run --port ${PORT} --name ${MODEL_ID}"
    assert _model({"cmd": cmd, "metadata": {"k": "${a}"}}, {"a": "A"}) == ([], {})
    # a macro whose value holds another: the later one (declared first) is replaced after
    assert _model({"cmd": cmd, "description": "${b}"}, {"a": "x", "b": "${a}"}) == ([], {})
    assert _model({"cmd": cmd, "description": "${a}"}, {"a": "x", "b": "${a}"}) == ([], {})
    assert _model({"cmd": cmd, "description": "${a}"}, {"a": "${c}"})[1] == {
        "m": "description holds unknown macro '${c}'"
    }
    own = {"cmd": cmd, "macros": {"z": 3}, "metadata": {"k": "${z}"}}
    assert _model(own) == ([], {})
    assert _model({**own, "metadata": {"k": "${y}"}})[1] == {
        "m": "metadata.k holds unknown macro '${y}'"
    }


def test_port_and_pid() -> None:
    assert _model({"cmd": "run"})[1] == {"m": "proxy uses ${PORT} but cmd does not"}
    assert _model({"cmd": "run", "proxy": "http://h:1"}) == ([], {})
    assert _model({"cmd": "run", "proxy": "http://h:1", "env": ["P=${PORT}"]})[1] == {
        "m": "env.0 holds unknown macro '${PORT}'"
    }
    assert _model({"cmd": "run --port ${PORT}", "env": ["P=${PORT}"]}) == ([], {})
    assert _model({"cmd": "run ${PORT}", "cmdStop": "kill ${PID}"}) == ([], {})
    assert _model({"cmd": "run ${PORT}", "ttl": "${PID}"})[1] == {
        "m": "ttl holds unknown macro '${PID}'"
    }


def test_comment_lines_of_cmd_are_dropped_first() -> None:
    cmd = "run --port ${PORT}\n  # ${foo} is no flag\n-x"
    assert _model({"cmd": cmd}) == ([], {})
    assert _model({"cmd": cmd.replace("  #", "  -")})[1] == {
        "m": "cmd holds unknown macro '${foo}'"
    }


def test_top_level_keys_and_bad_macros() -> None:
    ok = {"cmd": "run ${PORT}"}
    assert load_problems({"hooks": {"a": ["${nope}"]}, "models": {"m": ok}}) == (
        ["hooks.a.0 holds unknown macro '${nope}'"],
        {},
    )
    assert load_problems({"macros": {"v": 1}, "logLevel": "${v}", "models": {}}) == ([], {})
    top, per_model = load_problems({"macros": {"PORT": 1}, "models": {"m": ok}})
    assert top == ["macro name 'PORT' is reserved"] and per_model == {}
    assert _model({**ok, "macros": {"bad name": 1}})[1] == {
        "m": "macro name 'bad name' contains invalid characters, must match pattern "
        "^[a-zA-Z0-9_-]+$"
    }
