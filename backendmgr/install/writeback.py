"""An unpack's head start on the commit's ``syncfs`` (issue 34): the files it writes go to the
disk while the unpack goes on, so that the one ``syncfs`` before the commit finds little left.

Two things stand between written pages and the disk: the kernel writing them out (started
with Linux's ``sync_file_range``, every ``WRITEBACK_BYTES`` of a large file), and the disk's
own write cache, which only a flush empties (a virtual disk's cache is its host's memory: on
the bench's machine that flush takes 0.7 ms a MiB, about 70 ms for a 100 MiB build, which the
kernel's writeback alone does not shorten). So every ``FLUSH_BYTES`` an ``fdatasync`` runs in
a short thread of its own, overlapping the inflating and writing; it waits only for the disk.

Only a head start: the guarantee is still the commit's ``syncfs`` and folder fsync, which run
as before. A flush that fails for the disk (EIO, a full disk) fails the unpack, as a failed
write does; a file system that cannot flush a file (EINVAL) is left to the ``syncfs``.
"""

from __future__ import annotations

import errno
import os
import sys
import threading
from collections.abc import Callable
from functools import cache
from typing import cast

from . import stages

__all__ = ["FLUSH_BYTES", "WRITEBACK_BYTES", "EarlyFlush", "start_writeback"]

# Each large file's pages go to the disk from this many bytes on, while the unpack goes on
WRITEBACK_BYTES = 4 << 20
# and the disk's cache is flushed, in a thread of its own, each time this many more are written
FLUSH_BYTES = 8 << 20
_SYNC_FILE_RANGE_WRITE = 2
# what a file system says when it cannot flush a file: the syncfs does it
_UNSUPPORTED = {errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.EROFS}


@cache
def _sync_file_range() -> Callable[[int, int, int, int], int] | None:
    """Linux's sync_file_range(2), which the os module does not offer, from the C library."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        call = ctypes.CDLL(None, use_errno=True).sync_file_range
    except (OSError, AttributeError):  # pragma: no cover - a libc without it
        return None
    call.argtypes = [ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong, ctypes.c_uint]
    return cast("Callable[[int, int, int, int], int]", call)


def start_writeback(fd: int, offset: int, size: int) -> None:
    """Ask the kernel to start writing these pages to the disk, without waiting for it (as
    git's batched fsync does); an error here is ignored: the syncfs reports it."""
    call = _sync_file_range()
    if call is not None:
        call(fd, offset, size, _SYNC_FILE_RANGE_WRITE)


class EarlyFlush:
    """Flushes what was written so far to the disk, one ``fdatasync`` at a time, each in a
    thread of its own, while its caller goes on writing (Linux only: elsewhere nothing)."""

    def __init__(self) -> None:
        self._enabled: bool | None = None  # known at the first large write: ctypes loads then
        self._thread: threading.Thread | None = None
        self._since = 0  # bytes written since the last flush started
        self.error: OSError | None = None

    def wrote(self, fd: int, n: int) -> None:
        """``n`` more bytes were written to ``fd`` and their writeback started: flush them
        when enough have been, unless a flush still runs (the next one covers them). A
        failed flush is raised here, in the writing thread."""
        self.check()
        self._since += n
        if self._since < FLUSH_BYTES:
            return
        if self._enabled is None:
            self._enabled = _sync_file_range() is not None and hasattr(os, "fdatasync")
        if not self._enabled:
            return
        if self._thread is not None and self._thread.is_alive():
            return
        self._since = 0
        # its own descriptor: the file may be closed before the flush ends
        self._thread = threading.Thread(
            target=self._flush, args=(os.dup(fd),), name="backendmgr-unpack-flush", daemon=True
        )
        self._thread.start()

    def _flush(self, fd: int) -> None:
        try:
            with stages.timed("flush"):
                os.fdatasync(fd)
        except OSError as exc:
            if exc.errno not in _UNSUPPORTED:
                self.error = exc
        finally:
            os.close(fd)

    def join(self) -> None:
        """Wait for the flush that runs, if one does (the commit's syncfs would wait for it)."""
        if self._thread is not None:
            with stages.timed("flush_wait"):
                self._thread.join()
            self._thread = None

    def check(self) -> None:
        """A failed flush's error, raised in the caller's thread."""
        if self.error is not None:
            raise self.error
