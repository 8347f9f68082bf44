"""An unpack's file writes, done in order by a thread of their own (issue 34).

On two cores one thread that inflates and then writes each piece leaves a core idle once the
download is over. Here the unpacking thread inflates, parses headers and keeps every bound
(entry count, sizes, ratio, paths: extract.py, before a byte is handed over), and a second
thread creates the files and writes the pieces, in the order they were handed over. ISA-L's
inflate and ``os.write`` both run without the GIL, so the two overlap.

What waits between them is bounded (``QUEUED_BYTES`` of pieces, ``QUEUED_BATCHES`` batches of
at most ``BATCH_OPS`` operations): the unpacking thread waits when the writer falls behind.
Operations are handed over in batches (a piece of ``BATCH_BYTES`` or more goes at once): a
small file costs the two threads one hand-over between them at most, not three.

A failed write stops the writer and is raised in the unpacking thread at its next hand-over,
or when it waits for the writes to end; when the unpacking thread fails, what it handed over is
still written (or an interrupt stops it at once), and the writer is joined before the error goes
on, so nothing writes into a staging folder after its unpack has returned.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections import deque
from collections.abc import Iterator
from pathlib import Path

from . import stages
from .writeback import WRITEBACK_BYTES, EarlyFlush, start_writeback

__all__ = ["FileWriter", "writing"]

QUEUED_BYTES = 8 << 20
QUEUED_BATCHES = 256
BATCH_OPS = 64
BATCH_BYTES = 256 << 10
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_BINARY", 0) | os.O_CLOEXEC

_Op = tuple[Path, int] | memoryview | None  # open a file with a mode, write, close it


def _write_all(fd: int, view: memoryview) -> None:
    while view:
        view = view[os.write(fd, view) :]


def _set_mode(fd: int, dest: Path, mode: int) -> None:
    if hasattr(os, "fchmod"):
        os.fchmod(fd, mode)
    else:  # pragma: no cover - Windows
        os.chmod(dest, mode)


class FileWriter:
    """Creates files and writes their pieces, in the calling thread (``threaded=False``: an
    uncompressed tar, whose data the kernel copies) or in a thread started on first use."""

    def __init__(self, threaded: bool = True) -> None:
        self._threaded = threaded
        self._thread: threading.Thread | None = None
        self._cond = threading.Condition()
        self._ops: deque[tuple[list[_Op], int]] = deque()  # batches and their bytes
        self._queued = 0  # bytes in ``_ops``
        self._batch: list[_Op] = []  # not handed over yet
        self._batch_bytes = 0
        self._idle = True  # the writer waits for work, every op before it done
        self._stop = False
        self.error: BaseException | None = None
        self._fd = -1
        self._dest: Path | None = None
        self._mode = 0
        self._written = 0  # bytes written to the open file
        self._synced = 0  # of which their writeback is started
        self._early = EarlyFlush()  # and the disk's cache flushed, now and then

    # --- the unpacking thread's side

    def open(self, dest: Path, mode: int) -> None:
        self._put((dest, mode), 0)

    def write(self, piece: bytes | memoryview) -> None:
        view = memoryview(piece)
        if view:
            self._put(view, len(view))

    def close(self) -> None:
        self._put(None, 0)

    def _put(self, op: _Op, size: int) -> None:
        if not self._threaded:
            self._do(op)
            return
        self._batch.append(op)
        self._batch_bytes += size
        if self._batch_bytes >= BATCH_BYTES or len(self._batch) >= BATCH_OPS:
            self._flush()

    def _flush(self) -> None:
        """Hand the batch over, waiting while the writer is too far behind."""
        if not self._batch:
            return
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._run, name="backendmgr-unpack-writes", daemon=True
            )
            self._thread.start()
        with self._cond:
            if self._full() and not self.error:
                with stages.timed("write_backlog"):
                    while self._full() and not self.error:
                        self._cond.wait()
            if self.error is not None:
                raise self.error
            batch, size = self._batch, self._batch_bytes
            self._batch, self._batch_bytes = [], 0
            self._ops.append((batch, size))
            self._queued += size
            self._idle = False
            self._cond.notify_all()

    def _full(self) -> bool:
        return self._queued >= QUEUED_BYTES or len(self._ops) >= QUEUED_BATCHES

    def drain(self) -> None:
        """Wait until every write handed over is done (before a folder is made: a file of
        the same name, still queued, must be refused by ``mkdir`` as it is without a queue)."""
        self._flush()
        self._settle()
        if self.error is not None:
            raise self.error

    def _settle(self) -> None:
        """Wait until the writer has done what it was handed, or failed."""
        if self._thread is None:
            return
        with self._cond:
            while not self._idle and self.error is None:
                self._cond.wait()

    def finish(self) -> None:
        """Every write done and the threads ended; the writer's error, if it had one (a
        failed early flush's too)."""
        self._flush()
        try:
            if self._thread is None:
                self._close_file()
            else:
                self.drain()
                self.abort()
        finally:
            self._early.join()
        self._early.check()

    def abort(self) -> None:
        """Stop the writer (what is queued is dropped) and wait for its thread."""
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join()
        self._close_file()
        self._early.join()

    # --- the writer's side

    def _run(self) -> None:
        cpu = time.thread_time()
        try:
            while True:
                with self._cond:
                    while not self._ops and not self._stop:
                        self._idle = True
                        self._cond.notify_all()
                        self._cond.wait()
                    if self._stop:
                        return
                    batch, size = self._ops.popleft()
                    self._queued -= size
                    self._cond.notify_all()
                for op in batch:
                    self._do(op)
        except BaseException as exc:  # raised in the unpacking thread
            with self._cond:
                self.error = exc
                self._cond.notify_all()
        finally:
            stages.add("write_cpu", time.thread_time() - cpu)

    def _do(self, op: _Op) -> None:
        started = time.perf_counter()
        try:
            if isinstance(op, memoryview):
                _write_all(self._fd, op)
                self._written += len(op)
                if self._written - self._synced >= WRITEBACK_BYTES:
                    self._start_writeback()
            elif op is None:
                assert self._dest is not None
                _set_mode(self._fd, self._dest, self._mode)
                if self._synced:  # the rest of a large file; small ones wait for the syncfs
                    self._start_writeback()
                self._close_file()
            else:
                self._dest, self._mode = op
                self._fd = os.open(op[0], _CREATE, 0o600)
                self._written = self._synced = 0
        finally:
            stages.add("write", time.perf_counter() - started)

    def _start_writeback(self) -> None:
        """The open file's pages written since the last call go to the disk (writeback.py)."""
        start_writeback(self._fd, self._synced, self._written - self._synced)
        self._early.wrote(self._fd, self._written - self._synced)
        self._synced = self._written

    def _close_file(self) -> None:
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            os.close(fd)


@contextlib.contextmanager
def writing(threaded: bool = True) -> Iterator[FileWriter]:
    """A writer whose writes are all done (or stopped, on an error) when the block ends.
    When the block fails, what was handed over before is still written (a bounded amount) and
    a failed write's error is raised instead: it came first in the archive's order, as it
    does without a second thread. An interrupt stops the writer at once."""
    writer = FileWriter(threaded)
    try:
        yield writer
    except Exception:
        with contextlib.suppress(Exception):  # the writer's error: raised below
            writer._flush()
        writer._settle()
        writer.abort()
        if isinstance(writer.error, Exception):
            raise writer.error from None
        raise
    except BaseException:
        writer.abort()
        raise
    writer.finish()
