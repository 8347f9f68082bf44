"""The ``backendmgr`` command (``python -m backendmgr`` and the installed script): one command,
then out of the process without the interpreter's teardown."""

from __future__ import annotations

# ``signal`` builds enums at import; its C module does not
import _signal  # type: ignore[import-not-found]
import os
import sys
from typing import NoReturn

from backendmgr import _cancelled_while_starting

__all__ = ["entry", "leave"]


# From here until the command runs (entry puts Python's own back): this module is the command's
# start only (``python -m backendmgr`` and the installed script), never a library's import;
# the package set it already when it could tell the command was starting.
_signal.signal(_signal.SIGINT, _cancelled_while_starting)


def entry() -> NoReturn:
    from backendmgr._gc import short_lived

    short_lived()  # a command's process: the collector seldom (see backendmgr._gc)
    # The CLI runs on asyncio: httpx's own command-line client (click, rich, pygments: ~0.1 s,
    # imported whenever click is installed) and trio (~0.1 s, which httpcore imports whenever
    # it is installed, to learn whether it runs under it) are never used in this process. A
    # None entry makes that import fail as if they were missing, which both libraries expect.
    for unused in ("httpx._main", "trio"):
        sys.modules.setdefault(unused, None)  # type: ignore[arg-type]
    sys.unraisablehook = _unraisable
    from backendmgr.cli.main import main

    _signal.signal(_signal.SIGINT, _signal.default_int_handler)  # the command's own from here
    try:
        code = main()
    except SystemExit as done:  # argparse's exit after --help, --version: left as a command is
        if done.code is not None and not isinstance(done.code, int):
            raise  # a message for the interpreter to print
        code = done.code or 0
    leave(code)


def _unraisable(info: sys.UnraisableHookArgs) -> None:
    """A Ctrl-C that lands in code that cannot raise (a weak reference's callback, a
    finaliser: the interpreter prints those with a traceback and goes on) is no error of the
    command's: it goes unsaid, as the presses the command did hear are answered. Anything
    else is printed as the interpreter would."""
    if isinstance(info.exc_value, KeyboardInterrupt):
        return
    sys.__unraisablehook__(info)


def leave(code: int) -> NoReturn:
    """Exit with ``code`` as the interpreter would, without its teardown: freeing every module
    and object (0.1-0.5 s after an install here) changes nothing outside the process. What
    the ordinary exit does that matters is done here in the same order: wait for the threads
    that are not daemons (anyio's idle workers stop as the event loop closes), run the exit
    handlers (logging's flush, filelock's release of locks still held), flush the output."""
    import atexit

    if sys.getprofile() is not None or sys.gettrace() is not None:
        raise SystemExit(code)  # a profiler or debugger writes its report after this returns
    # the command is done and has said what it did: a Ctrl-C from here on ends the process as
    # the signal does (a shell shows 130), never as a traceback out of an exit handler
    _signal.signal(_signal.SIGINT, _signal.SIG_DFL)
    if "threading" in sys.modules:  # not loaded: no thread was started through it
        import threading

        for thread in threading.enumerate():
            if thread is not threading.current_thread() and not thread.daemon:
                thread.join()
    atexit._run_exitfuncs()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        raise SystemExit(code) from None  # the interpreter reports a failed flush its own way
    os._exit(code)


if __name__ == "__main__":
    entry()
