"""Running ``backendmgr``: in this process (the ``cli`` fixture, fast) or as a real child
process (for start-up, signals and exit codes), and the checks every CLI test makes."""

from __future__ import annotations

import contextlib
import io
import os
import signal
import subprocess
import sys
import threading
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass
class CliResult:
    code: int
    out: str
    err: str


Cli = Callable[..., CliResult]


def run_in_process(*args: str) -> CliResult:
    """``backendmgr ARGS`` through ``main()`` in this process, capturing what it prints: what a
    child process would do, without an interpreter start-up per command (the environment is
    this process's, as the fixtures set it)."""
    from backendmgr import _commit
    from backendmgr.cli import main as cli_main

    out, err = io.StringIO(), io.StringIO()
    sigint = signal.getsignal(signal.SIGINT)
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = cli_main.main(list(args))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except Exception:  # what the interpreter does with one (``--debug`` re-raises)
            traceback.print_exc()
            code = 1
        finally:  # a command's process ends here; this one goes on: its Ctrl-C as it was
            _commit._Policy.to_exit = False
            if sigint is not None and threading.current_thread() is threading.main_thread():
                signal.signal(signal.SIGINT, sigint)
    return CliResult(code, out.getvalue(), err.getvalue())


async def run_in_worker(*args: str) -> CliResult:
    """``run_in_process`` from async test code: in a worker thread, so that the test's event
    loop keeps running (a served app has its own thread and loop)."""
    import anyio

    return await anyio.to_thread.run_sync(lambda: run_in_process(*args))


def completed(result: CliResult, *args: str) -> subprocess.CompletedProcess[str]:
    """``result`` shaped as ``subprocess.run`` returns it, for tests written against that."""
    return subprocess.CompletedProcess(["backendmgr", *args], result.code, result.out, result.err)


def run_backendmgr(
    *args: str, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """Run the real console entry point in a child process."""
    return subprocess.run(
        [sys.executable, "-m", "backendmgr", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=timeout,
        check=False,
    )


def spawn_backendmgr(*args: str, **popen: Any) -> subprocess.Popen[str]:
    """Start the real console entry point and return at once (for kill -9 and Ctrl-C)."""
    kwargs: dict[str, Any] = {
        # a hang can be made to show its threads' Python stacks (:func:`finish`)
        "env": {**os.environ, "PYTHONFAULTHANDLER": "1"},
        "stdout": subprocess.PIPE,
        "stderr": subprocess.PIPE,
        "text": True,
    }
    kwargs.update(popen)
    return subprocess.Popen([sys.executable, "-m", "backendmgr", *args], **kwargs)


def finish(proc: subprocess.Popen[str], timeout: float) -> tuple[str, str]:
    """``proc.communicate(timeout=timeout)``; a process of :func:`spawn_backendmgr` still
    running then is made to print every thread's Python stack (faulthandler, on SIGABRT) and
    the test fails with them, so that a rare hang says where it waits."""
    try:
        return proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGABRT)
        _, err = proc.communicate(timeout=30)
        raise AssertionError(f"still running after {timeout:g} s; its threads:\n{err}") from None


def ok(result: CliResult) -> CliResult:
    """A command that succeeded, without a traceback."""
    assert result.code == 0, result
    assert "Traceback" not in result.err, result.err
    return result


def error_line(result: CliResult, code: int = 1) -> str:
    """The one ``error:`` line of a command that failed with ``code``; progress lines (one per
    phase) may come before it, a traceback may not."""
    assert result.code == code, result
    assert "Traceback" not in result.err, result.err
    errors = [line for line in result.err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, result.err
    return errors[0]
