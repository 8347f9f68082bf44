"""The pure port of llama-swap's cmd/env expansion (issue 28 point 3), table by table: golib's
own shlex.Posix tests, then llama-swap's order of macro phases. The real binary judges the
same function in tests/cli/test_expand_real.py."""

from __future__ import annotations

import pytest

from backendmgr.emit.expand import ExpandError, expand, go_trim_space, posix_split, sanitize_command

# github.com/billziss-gh/golib shlex/shlex_test.go (MIT): TestPosix, then TestPosix2's table.
GOLIB_POSIX = [
    ("", []),
    ("foo", ["foo"]),
    (" foo", ["foo"]),
    ("   foo", ["foo"]),
    ("foo ", ["foo"]),
    ("foo   ", ["foo"]),
    ("foo bar", ["foo", "bar"]),
    ("foo   bar", ["foo", "bar"]),
    ('foo"   "bar', ["foo   bar"]),
    ('foo"   ', ["foo   "]),
    ('"   "foo', ["   foo"]),
    ('foo "bar   baz"', ["foo", "bar   baz"]),
    ('foo "bar   baz', ["foo", "bar   baz"]),
    ('foo "bar   baz ', ["foo", "bar   baz "]),
    ('foo "bar   baz" ', ["foo", "bar   baz"]),
    ('foo "bar   baz" bag', ["foo", "bar   baz", "bag"]),
    ('foo "bar   baz"bag', ["foo", "bar   bazbag"]),
    ('foo ""', ["foo", ""]),
    ('foo "" bar', ["foo", "", "bar"]),
    ("foo'   'bar", ["foo   bar"]),
    ("foo'   ", ["foo   "]),
    ("'   foo", ["   foo"]),
    ("foo 'bar   baz'", ["foo", "bar   baz"]),
    ("foo 'bar   baz", ["foo", "bar   baz"]),
    ("foo 'bar   baz ", ["foo", "bar   baz "]),
    ("foo 'bar   baz' ", ["foo", "bar   baz"]),
    ("foo 'bar   baz' bag", ["foo", "bar   baz", "bag"]),
    ("foo 'bar   baz'bag", ["foo", "bar   bazbag"]),
    ("foo ''", ["foo", ""]),
    ("foo '' bar", ["foo", "", "bar"]),
    ("\\foo", ["foo"]),
    ("f\\oo", ["foo"]),
    ("foo\\", ["foo"]),
    ('\\"foo', ['"foo']),
    ('f\\"oo', ['f"oo']),
    ('foo\\"', ['foo"']),
    ("\\'foo", ["'foo"]),
    ("f\\'oo", ["f'oo"]),
    ("foo\\'", ["foo'"]),
    ("foo\\\nbar", ["foobar"]),
    ('foo "b\\ar"', ["foo", "b\\ar"]),
    ('foo "b\\"ar"', ["foo", 'b"ar']),
    ('foo "b\'ar"', ["foo", "b'ar"]),
    ("foo \"b'a'r\"", ["foo", "b'a'r"]),
    ('foo"\\', ["foo"]),
    ('foo"\\\nbar"', ["foobar"]),
    ('foo"\\\nbar', ["foobar"]),
    ("foo 'b\\ar'", ["foo", "b\\ar"]),
    ("foo 'b\\\"ar'", ["foo", 'b\\"ar']),
    ("foo 'b\"ar'", ["foo", 'b"ar']),
    ("foo 'b\"a\"r'", ["foo", 'b"a"r']),
    ("foo'\\", ["foo\\"]),
    ("foo'\\\nbar'", ["foo\\\nbar"]),
    ("foo'\\\nbar", ["foo\\\nbar"]),
    ("x", ["x"]),
    ("foo bar", ["foo", "bar"]),
    (" foo bar", ["foo", "bar"]),
    (" foo bar ", ["foo", "bar"]),
    ("foo   bar    bla     fasel", ["foo", "bar", "bla", "fasel"]),
    ("x y  z              xxxx", ["x", "y", "z", "xxxx"]),
    ("\\x bar", ["x", "bar"]),
    ("\\ x bar", [" x", "bar"]),
    ("\\ bar", [" bar"]),
    ("foo \\x bar", ["foo", "x", "bar"]),
    ("foo \\ x bar", ["foo", " x", "bar"]),
    ("foo \\ bar", ["foo", " bar"]),
    ('foo "bar" bla', ["foo", "bar", "bla"]),
    ('"foo" "bar" "bla"', ["foo", "bar", "bla"]),
    ('"foo" bar "bla"', ["foo", "bar", "bla"]),
    ('"foo" bar bla', ["foo", "bar", "bla"]),
    ("foo 'bar' bla", ["foo", "bar", "bla"]),
    ("'foo' 'bar' 'bla'", ["foo", "bar", "bla"]),
    ("'foo' bar 'bla'", ["foo", "bar", "bla"]),
    ("'foo' bar bla", ["foo", "bar", "bla"]),
    ('blurb foo"bar"bar"fasel" baz', ["blurb", "foobarbarfasel", "baz"]),
    ("blurb foo'bar'bar'fasel' baz", ["blurb", "foobarbarfasel", "baz"]),
    ('""', [""]),
    ("''", [""]),
    ('foo "" bar', ["foo", "", "bar"]),
    ("foo '' bar", ["foo", "", "bar"]),
    ('foo "" "" "" bar', ["foo", "", "", "", "bar"]),
    ("foo '' '' '' bar", ["foo", "", "", "", "bar"]),
    ('\\"', ['"']),
    ('"\\""', ['"']),
    ('"foo\\ bar"', ["foo\\ bar"]),
    ('"foo\\\\ bar"', ["foo\\ bar"]),
    ('"foo\\\\ bar\\""', ['foo\\ bar"']),
    ('"foo\\\\" bar\\"', ["foo\\", 'bar"']),
    ('"foo\\\\ bar\\" dfadf"', ['foo\\ bar" dfadf']),
    ('"foo\\\\\\ bar\\" dfadf"', ['foo\\\\ bar" dfadf']),
    ('"foo\\\\\\x bar\\" dfadf"', ['foo\\\\x bar" dfadf']),
    ('"foo\\x bar\\" dfadf"', ['foo\\x bar" dfadf']),
    ("\\'", ["'"]),
    ("'foo\\ bar'", ["foo\\ bar"]),
    ("'foo\\\\ bar'", ["foo\\\\ bar"]),
    ('"foo\\\\\\x bar\\" df\'a\\ \'df"', ["foo\\\\x bar\" df'a\\ 'df"]),
    ('\\"foo', ['"foo']),
    ('\\"foo\\x', ['"foox']),
    ('"foo\\x"', ["foo\\x"]),
    ('"foo\\ "', ["foo\\ "]),
    ("foo\\ xx", ["foo xx"]),
    ("foo\\ x\\x", ["foo xx"]),
    ('foo\\ x\\x\\"', ['foo xx"']),
    ('"foo\\ x\\x"', ["foo\\ x\\x"]),
    ('"foo\\ x\\x\\\\"', ["foo\\ x\\x\\"]),
    ('"foo\\ x\\x\\\\""foobar"', ["foo\\ x\\x\\foobar"]),
    ('"foo\\ x\\x\\\\"\\\'"foobar"', ["foo\\ x\\x\\'foobar"]),
    ('"foo\\ x\\x\\\\"\\\'"fo\'obar"', ["foo\\ x\\x\\'fo'obar"]),
    ("\"foo\\ x\\x\\\\\"\\'\"fo'obar\" 'don'\\''t'", ["foo\\ x\\x\\'fo'obar", "don't"]),
    ("\"foo\\ x\\x\\\\\"\\'\"fo'obar\" 'don'\\''t' \\\\", ["foo\\ x\\x\\'fo'obar", "don't", "\\"]),
    ("'foo\\ bar'", ["foo\\ bar"]),
    ("'foo\\\\ bar'", ["foo\\\\ bar"]),
    ("foo\\ bar", ["foo bar"]),
    (":-) ;-)", [":-)", ";-)"]),
    ("áéíóú", ["áéíóú"]),
]


@pytest.mark.parametrize(("line", "words"), GOLIB_POSIX)
def test_posix_split_matches_golib(line: str, words: list[str]) -> None:
    assert posix_split(line) == words


def test_go_trim_space_is_gos_not_pythons() -> None:
    # Python counts \x1c-\x1f as space; Go's unicode.IsSpace does not
    assert go_trim_space("\x1f# x\x1f") == "\x1f# x\x1f"
    assert go_trim_space("\u3000\x85 # x\xa0\t") == "# x"


@pytest.mark.parametrize(
    ("cmd", "argv"),
    [
        ("srv\n# a comment\n  -a 1", ["srv", "-a", "1"]),
        ("srv \\\n  -a 1 \\\n  -b", ["srv", "-a", "1", "-b"]),
        ("srv \\  \n-a", ["srv", "-a"]),  # trailing blanks after the backslash are trimmed
        ("srv 'a\nb'", ["srv", "a\nb"]),
        ("srv\n  #-a\n\t# -b\n-c", ["srv", "-c"]),
        ("srv '#not a comment'", ["srv", "#not a comment"]),
        ("srv $\\{foo} '$'\"{bar}\"", ["srv", "${foo}", "${bar}"]),
        ("srv \\\r\n-a", ["srv", "-a"]),
    ],
)
def test_sanitize_command(cmd: str, argv: list[str]) -> None:
    assert sanitize_command(cmd) == argv


def test_an_empty_command_is_refused() -> None:
    with pytest.raises(ExpandError, match="empty command"):
        sanitize_command("# only\n  \\\n")


BASE = {"PATH": "/bin", "HOMEY": 'C:\\x "q"', "N": "5"}


def run(
    cmd: str,
    env: list[str] | None = None,
    macros: dict[str, object] | None = None,
    model_macros: dict[str, object] | None = None,
    proxy: str | None = "http://127.0.0.1:9",  # a cmd without ${PORT} needs a proxy without it
) -> tuple[list[str], dict[str, str]]:
    return expand(
        "m1",
        cmd,
        env or [],
        port=5801,
        environ=BASE,
        macros=macros,
        model_macros=model_macros,
        proxy=proxy,
    )


def test_port_model_id_and_env_reach_cmd_and_env() -> None:
    argv, env = run(
        "srv --port ${PORT} --alias ${MODEL_ID} --home ${env.HOMEY}",
        ["A=${PORT}", "B=${MODEL_ID}-${env.N}", "C=x=y", "H=${env.HOMEY}"],
    )
    # the value lands in cmd's text, which shell words then split and unquote
    assert argv == ["srv", "--port", "5801", "--alias", "m1", "--home", "C:x", "q"]
    assert env == {**BASE, "A": "5801", "B": "m1-5", "C": "x=y", "H": 'C:\\x "q"'}


def test_port_is_only_allocated_when_cmd_asks() -> None:
    with pytest.raises(ExpandError, match=r"proxy uses \$\{PORT\} but cmd does not"):
        run("srv", ["P=1"], proxy=None)  # llama-swap's default proxy wants one
    with pytest.raises(ExpandError, match=r"model m1 env: unknown macro '\$\{PORT\}'"):
        expand("m1", "srv", ["P=${PORT}"], port=1, environ={}, proxy="http://h:9")
    with pytest.raises(ExpandError, match=r"unknown macro '\$\{x\}' found in m1.proxy"):
        expand("m1", "srv ${PORT}", [], port=1, environ={}, proxy="http://h:${x}")


def test_unknown_macros_fail_but_comment_lines_and_escapes_do_not() -> None:
    with pytest.raises(ExpandError, match=r"unknown macro '\$\{foo\}' found in m1\.cmd"):
        run("srv ${foo}")
    assert run("srv\n# ${foo} ignored\n$\\{foo}")[0] == ["srv", "${foo}"]
    with pytest.raises(ExpandError, match=r"model m1 env: unknown macro '\$\{foo\}'"):
        run("srv", ["D=${foo}"])


def test_unset_env_variable_fails_naming_it_even_in_a_comment_line() -> None:
    with pytest.raises(ExpandError, match="environment variable 'NOPE' is not set"):
        run("srv\n# ${env.NOPE}")
    with pytest.raises(ExpandError, match="'BAD' contains newlines"):
        expand("m", "srv ${env.BAD}", [], port=1, environ={"BAD": "a\nb"})


def test_env_values_are_text_not_macros_until_phase_two() -> None:
    # llama-swap replaces ${env.X} in the text first: a value holding ${PORT} becomes a macro
    environ = {"X": "${PORT}", "Y": "${foo}"}
    assert expand("m", "srv ${env.X}", [], port=7, environ=environ)[0] == ["srv", "7"]
    with pytest.raises(ExpandError, match="unknown macro"):
        expand("m", "srv ${PORT} ${env.Y}", [], port=7, environ=environ)


def test_declared_macros_in_order_model_overrides_global() -> None:
    macros: dict[str, object] = {"base": "/models", "file": "${base}/a.gguf", "n": 8, "b": True}
    argv, env = run(
        "srv -m ${file} -n ${n} --b ${b} --who ${who}",
        ["W=${who}", "N=${n}"],
        macros=macros,
        model_macros={"base": "/other", "who": "${MODEL_ID}"},
    )
    assert argv == ["srv", "-m", "/other/a.gguf", "-n", "8", "--b", "true", "--who", "m1"]
    assert env["W"] == "m1" and env["N"] == "8"


@pytest.mark.parametrize(
    ("macros", "message"),
    [
        ({"PORT": 1}, "macro name 'PORT' is reserved"),
        ({"a b": 1}, "invalid characters"),
        ({"x\n": 1}, "invalid characters"),
        ({"x" * 64: 1}, "exceeds maximum length"),
        ({"me": "${me}"}, "self-reference"),
        ({"l": [1]}, "invalid type"),
    ],
)
def test_bad_declarations_fail_like_llama_swap(macros: dict[str, object], message: str) -> None:
    with pytest.raises(ExpandError, match=message):
        run("srv", macros=macros)
    with pytest.raises(ExpandError, match="(?s)model m1: .*" + message):
        run("srv", model_macros=macros)


def test_environment_last_value_wins_and_non_variables_are_dropped() -> None:
    _, env = run("srv", ["PATH=/x", "PATH=/y", "NOEQ", "", "E="])
    assert env["PATH"] == "/y" and env["E"] == "" and "NOEQ" not in env and "" not in env
    with pytest.raises(ExpandError, match="NUL"):
        run("srv", ["A=\x00"])


@pytest.mark.parametrize(
    ("value", "inside", "whole"),
    [(1e6, "1000000", "1e+06"), (2.0, "2", "2"), (1e21, "1e+21", "1e+21"), (0.5, "0.5", "0.5")],
)
def test_floats_as_go_prints_them(value: float, inside: str, whole: str) -> None:
    # fmt's %v inside a string (exponent from 21), yaml.v3's 'g' for a whole-string value
    assert run("srv x${v}", macros={"v": value})[0][1] == "x" + inside
    assert run("${v}", macros={"v": value})[0] == [whole]
