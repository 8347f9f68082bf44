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
    code = (  # the command leaves without the interpreter's teardown: said by an exit handler
        "import atexit, sys, backendmgr.__main__ as m\n"
        "sys.argv = ['backendmgr', '--version']\n"
        "atexit.register(lambda: print(sys.unraisablehook is m._unraisable))\n"
        "m.entry()"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip().endswith("True"), done.stderr


# the thresholds the command's process ran with, said as it leaves (``leave`` runs the exit
# handlers as the interpreter does)
THRESHOLDS = """
import atexit, gc, sys
atexit.register(lambda: sys.stderr.write(f"thresholds {gc.get_threshold()}\\n"))
sys.argv = ["backendmgr", *sys.argv[1:]]
from backendmgr.__main__ import entry
entry()
"""


def thresholds(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", THRESHOLDS, *args], capture_output=True, text=True, timeout=120
    )
    said = [line for line in done.stderr.splitlines() if line.startswith("thresholds ")]
    assert len(said) == 1, done.stderr
    return said[0].removeprefix("thresholds ")


def test_a_command_collects_cycles_rarely_and_a_long_running_one_as_python_does() -> None:
    """A short command leaves before its few cycles matter (``backendmgr._gc``); `serve`
    and `up` run for hours and set Python's own thresholds first, even when they then stop
    at once (a token refused, no llama-swap to run)."""
    from backendmgr._gc import SHORT_LIVED, USUAL

    assert thresholds("--version") == str(SHORT_LIVED)
    assert thresholds("list") == str(SHORT_LIVED)
    assert thresholds("serve", "--token", "short") == str(USUAL)
    assert thresholds("up") == str(USUAL)
    fresh = subprocess.run(
        [sys.executable, "-c", "import gc; print(gc.get_threshold())"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert fresh.stdout.strip() == str(USUAL)  # what the interpreter starts with


def test_a_ctrl_c_while_the_command_loads_is_a_cancel_not_a_traceback() -> None:
    """SIGINT once the command has begun loading (here: right after its entry module, while
    the rest would import) ends it as every cancel does; the command itself then gets
    Python's own KeyboardInterrupt back, which it answers as a cancel too."""
    code = (
        "import os, signal, sys\n"
        "import backendmgr.__main__ as m\n"
        "os.kill(os.getpid(), signal.SIGINT)\n"
        "import time; time.sleep(5)\n"
        "print('went on')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout, done.stderr) == (130, "", "error: cancelled\n")
    restored = (  # what the command runs with: Python's own handler
        "import signal, sys\n"
        "import backendmgr.__main__ as m, backendmgr.cli.main as cli\n"
        "def main():\n"
        "    print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)\n"
        "    return 0\n"
        "cli.main = main\n"
        "m.entry()"
    )
    done = subprocess.run(
        [sys.executable, "-c", restored], capture_output=True, text=True, timeout=60
    )
    assert done.stdout.strip().endswith("True"), done.stderr


def test_the_package_quiets_a_ctrl_c_only_when_it_is_the_command_starting() -> None:
    """``python -m backendmgr`` imports the package before the entry module: a Ctrl-C there is
    a cancel too. A program that imports backendmgr as a library keeps its own Ctrl-C."""
    as_command = (
        "import os, signal, sys, time\n"
        "sys.orig_argv = [sys.executable, '-m', 'backendmgr', 'list']\n"
        "import backendmgr\n"
        "os.kill(os.getpid(), signal.SIGINT)\n"
        "time.sleep(5)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", as_command], capture_output=True, text=True, timeout=60
    )
    assert (done.returncode, done.stderr) == (130, "error: cancelled\n")
    as_library = (
        "import signal\n"
        "import backendmgr\n"
        "print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", as_library], capture_output=True, text=True, timeout=60
    )
    assert done.stdout == "True\n", done.stderr
