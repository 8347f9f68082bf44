"""How the ``backendmgr`` process ends (``backendmgr/__main__.py``): a Ctrl-C that lands where
Python cannot raise it says nothing; every other exception there still shows as Python shows
it."""

from __future__ import annotations

import subprocess
import sys

# a weak reference's callback runs when its object goes: an exception in it cannot propagate,
# and the interpreter hands it to sys.unraisablehook (by default: "Exception ignored in", a
# traceback, and the program goes on) -- which is where a third Ctrl-C landed in a canary's
# undo and printed a traceback (tests/measure/test_bench.py, found by the clean-clone CI)
SCRIPT = """
import sys, weakref
import backendmgr.__main__ as entry
sys.unraisablehook = entry._unraisable if sys.argv[1] == "ours" else sys.__unraisablehook__

class Thing:
    pass

def interrupted(ref):
    raise KeyboardInterrupt

def broken(ref):
    raise ValueError("a real mistake")

thing = Thing()
kept = weakref.ref(thing, interrupted if sys.argv[2] == "ctrl-c" else broken)
del thing
print("went on")
"""


def run(hook: str, what: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", SCRIPT, hook, what], capture_output=True, text=True, timeout=60
    )


def test_a_ctrl_c_that_cannot_be_raised_prints_no_traceback() -> None:
    assert "Traceback" in run("python", "ctrl-c").stderr  # what users saw before
    done = run("ours", "ctrl-c")
    assert (done.stdout, done.stderr) == ("went on\n", "")


def test_any_other_exception_there_is_still_shown() -> None:
    done = run("ours", "mistake")
    assert done.stdout == "went on\n"
    assert "ValueError: a real mistake" in done.stderr and "Traceback" in done.stderr


def test_the_command_installs_the_hook() -> None:
    code = (
        "import sys, backendmgr.__main__ as m\n"
        "sys.argv = ['backendmgr', '--version']\n"
        "try:\n    m.entry()\nexcept SystemExit:\n    pass\n"
        "print(sys.unraisablehook is m._unraisable)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip().endswith("True"), done.stderr
