"""Run between fork and exec by ``open_group(..., die_with_parent=True)`` (anyio starts
processes without a preexec hook), as ``python -I -S _child_shim.py PARENT EXE ARGV…``: it
imports nothing of backendmgr.

It asks the kernel for SIGTERM when the parent dies (Linux's PR_SET_PDEATHSIG, kept across
exec), gives up if the parent is already gone, and becomes the program (same pid). The
program's stdout and stderr reach the parent's pipes through a relay forked here: once the
parent is gone (kill -9) those pipes are broken, and a Go program writing its log to a broken
stdout dies of SIGPIPE at once, before it has stopped the servers it started. The relay keeps
reading (dropping what no one can read any more) until the program closes its output.
"""

from __future__ import annotations

import os
import selectors
import signal
import sys

PR_SET_PDEATHSIG = 1


def relay(pipes: dict[int, int]) -> None:
    """Copy each pipe (read end → target fd) until all have ended; a target that broke is
    dropped, its pipe still drained. Deaf to the signals that stop its program's group."""
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_IGN)
    selector = selectors.DefaultSelector()
    for source, target in pipes.items():
        selector.register(source, selectors.EVENT_READ, target)
    writable = set(pipes.values())
    while selector.get_map():
        for key, _ in selector.select():
            data = os.read(key.fd, 65536)
            if not data:
                selector.unregister(key.fd)
                os.close(key.fd)
                continue
            target = key.data
            if target in writable:
                try:
                    while data:
                        data = data[os.write(target, data) :]
                except OSError:
                    writable.discard(target)


def main(args: list[str]) -> None:
    parent, exe, argv = int(args[0]), args[1], args[2:]
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:
        sys.exit(143)
    ends = {fd: os.pipe() for fd in (1, 2)}
    if os.fork() == 0:  # the relay: its parent-death signal is not inherited
        for _, write in ends.values():
            os.close(write)
        relay({read: fd for fd, (read, _) in ends.items()})
        os._exit(0)
    for fd, (read, write) in ends.items():
        os.dup2(write, fd)
        os.close(read)
        os.close(write)
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # as Python's start left it: not the program's
    signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
    try:
        os.execv(exe, argv)
    except OSError as exc:
        sys.stderr.write(f"cannot start {exe}: {exc.strerror}\n")
        sys.exit(127)


if __name__ == "__main__":
    main(sys.argv[1:])
