"""The pid note beside a held lock (who a waiter waits for): written by the holder, read by
a waiter, and never a way to write or hang through a link or FIFO planted in its place."""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import pytest
from filelock import FileLock

from backendmgr._locks import hold, holder_pid


@pytest.mark.parametrize("kind", ["link", "fifo", "none"])
def test_the_pid_note_is_made_anew_never_through_what_had_its_name(
    tmp_path: Path, kind: str
) -> None:
    lock = FileLock(tmp_path / "x.lock")
    note = tmp_path / "x.lock.pid"
    canary = tmp_path / "canary"
    canary.write_text("not yours\n")
    if kind == "link":
        note.symlink_to(canary)
    elif kind == "fifo":
        os.mkfifo(note)
        assert holder_pid(lock) is None  # read without waiting for a writer

    async def held() -> int | None:
        async with hold(lock):
            return holder_pid(lock)

    assert anyio.run(held) == os.getpid()
    assert not note.is_symlink() and note.read_text() == f"{os.getpid()}\n"
    assert canary.read_text() == "not yours\n"


def test_a_linked_note_is_no_holder(tmp_path: Path) -> None:
    lock = FileLock(tmp_path / "x.lock")
    (tmp_path / "pid").write_text("4242\n")
    Path(f"{lock.lock_file}.pid").symlink_to(tmp_path / "pid")
    assert holder_pid(lock) is None
    Path(f"{lock.lock_file}.pid").unlink()
    Path(f"{lock.lock_file}.pid").write_text("4242\n")
    assert holder_pid(lock) == 4242
