"""File writes in a second thread (install/writer.py): the unpack ends the way it ends with
one thread, errors included, and leaves no thread behind."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from backendmgr.errors import UnsafeArchive
from backendmgr.install import extract as extract_module
from backendmgr.install import writeback
from backendmgr.install import writer as writer_module
from backendmgr.install.extract import extract, extract_stream
from backendmgr.install.writer import FileWriter, writing
from tests.support.archives import Entry, make_tar, make_zip

WRITER_THREAD = "backendmgr-unpack-writes"


def _writer_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == WRITER_THREAD]


@pytest.fixture(params=[True, False], ids=["two-threads", "one-thread"])
def threaded(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[bool]:
    """Each test runs with the writes in their own thread and in the unpacking thread: the
    outcome must be the same."""
    if not request.param:
        monkeypatch.setattr(extract_module, "writing", lambda threaded=True: writing(False))
    yield request.param
    assert not _writer_threads()


def _archive(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    (tmp_path / "out").mkdir()
    return path


BIG = os.urandom(3 << 20)  # several pieces, so that the writer is still busy with it


@pytest.mark.parametrize("name", ["a.tar.gz", "a.zip"])
def test_a_tree_is_written_whole_with_its_modes(tmp_path: Path, threaded: bool, name: str) -> None:
    entries = [Entry("t/", kind="dir", mode=0o755)]
    entries += [
        Entry(f"t/f{i}", os.urandom(i * 997), mode=0o600 | (i % 2) * 0o111) for i in range(40)
    ]
    entries.append(Entry("t/big", BIG, mode=0o644))
    builder = make_zip if name.endswith(".zip") else make_tar
    path = _archive(tmp_path, name, builder(entries))
    report = extract(path, name, tmp_path / "out", exe_name="x")
    assert report.files == 41
    for e in entries[1:]:
        dest = tmp_path / "out" / e.name
        assert dest.read_bytes() == e.data
        assert os.stat(dest).st_mode & 0o777 == e.mode


def test_a_failed_write_is_the_unpacks_error(tmp_path: Path, threaded: bool) -> None:
    # "t/x" is a folder by the time its file is opened: the open fails (in the writer's thread)
    entries = [Entry("t/x/", kind="dir"), Entry("t/x", BIG)]
    path = _archive(tmp_path, "a.tar.gz", make_tar(entries))
    with pytest.raises(UnsafeArchive, match="'t/x' is both a file and a folder") as caught:
        extract(path, "a.tar.gz", tmp_path / "out", exe_name="x")
    assert isinstance(caught.value.__cause__, IsADirectoryError)


def test_a_failed_write_comes_before_a_later_refusal(tmp_path: Path, threaded: bool) -> None:
    """The unpacking thread may reach a refused member while the write before it still waits:
    the write's failure is the answer, as it is when one thread does both."""
    entries = [Entry("t/x/", kind="dir"), Entry("t/x", BIG), Entry("../evil", b"x")]
    path = _archive(tmp_path, "a.tar.gz", make_tar(entries))
    with pytest.raises(UnsafeArchive, match="'t/x' is both a file and a folder"):
        extract(path, "a.tar.gz", tmp_path / "out", exe_name="x")
    assert not (tmp_path / "evil").exists()


def test_a_file_then_a_folder_of_its_name_fails_as_with_one_thread(
    tmp_path: Path, threaded: bool
) -> None:
    # the writer is still busy with "t/big" when "t/a/" is needed as a folder
    entries = [Entry("t/big", BIG), Entry("t/a", b"data"), Entry("t/a/b", b"more")]
    path = _archive(tmp_path, "a.tar.gz", make_tar(entries))
    with pytest.raises(
        UnsafeArchive, match=r"a\.tar\.gz: 't/a' is both a file and a folder"
    ) as caught:
        extract(path, "a.tar.gz", tmp_path / "out", exe_name="x")
    assert isinstance(caught.value.__cause__, FileExistsError)


def test_a_refusal_stops_the_writer_after_what_came_before(tmp_path: Path, threaded: bool) -> None:
    first = os.urandom(256 << 10)
    entries = [Entry("t/first", first), Entry("t/bomb", bytes(150 << 20))]
    path = _archive(tmp_path, "a.tar.gz", make_tar(entries))
    with (
        pytest.raises(UnsafeArchive, match="expand"),
        path.open("rb") as fh,
    ):
        extract_stream(fh, "a.tar.gz", tmp_path / "out", compressed=path.stat().st_size)
    assert (tmp_path / "out" / "t" / "first").read_bytes() == first


def test_the_writer_never_holds_more_than_its_bound(tmp_path: Path) -> None:
    """A writer that cannot keep up makes the unpacking thread wait: what waits between them
    stays under the bound, whatever is handed over."""
    gate = threading.Event()
    seen: list[int] = []
    writer = FileWriter()
    real_do = writer._do

    def slow_do(op: object) -> None:
        gate.wait(5)
        seen.append(writer._queued)
        real_do(op)  # type: ignore[arg-type]

    writer._do = slow_do  # type: ignore[method-assign]
    piece = os.urandom(1 << 20)
    handed = threading.Event()

    def hand_over() -> None:
        writer.open(tmp_path / "f", 0o644)
        for _ in range(32):
            writer.write(piece)
        writer.close()
        handed.set()

    thread = threading.Thread(target=hand_over)
    thread.start()
    assert not handed.wait(0.5)  # 32 MiB cannot all wait in the queue
    assert writer._queued <= writer_module.QUEUED_BYTES
    gate.set()
    thread.join(10)
    writer.finish()
    assert max(seen) <= writer_module.QUEUED_BYTES
    assert (tmp_path / "f").read_bytes() == piece * 32
    assert not _writer_threads()


def test_large_files_start_their_writeback_as_they_are_written(tmp_path: Path) -> None:
    """The commit's one syncfs finds a large file's pages already on their way to the disk;
    the bytes are the same."""
    if sys.platform.startswith("linux"):
        call = writeback._sync_file_range()
        assert call is not None
        with (tmp_path / "probe").open("wb") as fh:
            fh.write(b"x" * 8192)
            fh.flush()
            assert call(fh.fileno(), 0, 8192, writeback._SYNC_FILE_RANGE_WRITE) == 0
    pieces = [os.urandom(1 << 20) for _ in range(9)]  # past WRITEBACK_BYTES twice
    with writing() as writer:
        writer.open(tmp_path / "big", 0o640)
        for piece in pieces:
            writer.write(piece)
        writer.close()
    assert (tmp_path / "big").read_bytes() == b"".join(pieces)
    assert os.stat(tmp_path / "big").st_mode & 0o777 == 0o640


class _Cut(Exception):
    pass


class _CutSource:
    """An archive whose bytes stop coming half-way (a download that failed or started over,
    as archive_job's follower raises it)."""

    def __init__(self, data: bytes, cut_at: int) -> None:
        self._data = data
        self._cut_at = cut_at
        self._pos = 0

    def read(self, n: int = -1, /) -> bytes:
        if self._pos >= self._cut_at:
            raise _Cut("the download started over")
        out = self._data[self._pos : min(self._pos + n, self._cut_at)]
        self._pos += len(out)
        return out


def test_a_source_that_fails_half_way_stops_the_writes_and_the_thread(tmp_path: Path) -> None:
    entries = [Entry(f"t/f{i}", os.urandom(1 << 20)) for i in range(6)]
    data = make_tar(entries)
    (tmp_path / "out").mkdir()
    with pytest.raises(_Cut):
        extract_stream(
            _CutSource(data, len(data) // 2), "a.tar.gz", tmp_path / "out", compressed=len(data)
        )
    assert not _writer_threads()
    assert (tmp_path / "out" / "t" / "f0").read_bytes() == entries[0].data


def _flush_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "backendmgr-unpack-flush"]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux's early flush")
@pytest.mark.parametrize("threads", [True, False], ids=["two-threads", "one-thread"])
def test_large_files_are_flushed_early_and_the_flush_is_over_when_the_writes_are(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, threads: bool
) -> None:
    """Every FLUSH_BYTES an fdatasync runs beside the writes (on its own descriptor: the file
    may be closed first); none is left running when the writes are done."""
    flushed: list[int] = []
    real = os.fdatasync

    def counted(fd: int) -> None:
        flushed.append(os.fstat(fd).st_size)
        real(fd)

    monkeypatch.setattr(os, "fdatasync", counted)
    monkeypatch.setattr(writeback, "FLUSH_BYTES", 2 << 20)
    monkeypatch.setattr(writer_module, "WRITEBACK_BYTES", 1 << 20)
    pieces = [os.urandom(1 << 20) for _ in range(3)]
    with writing(threads) as writer:
        for n in range(3):
            writer.open(tmp_path / f"big{n}", 0o644)
            for piece in pieces:
                writer.write(piece)
            writer.close()
    assert flushed  # at least one, while files were still being written
    assert not _flush_threads()
    for n in range(3):
        assert (tmp_path / f"big{n}").read_bytes() == b"".join(pieces)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux's early flush")
@pytest.mark.parametrize("threads", [True, False], ids=["two-threads", "one-thread"])
def test_a_flush_the_disk_fails_fails_the_unpack_one_it_cannot_do_does_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, threads: bool
) -> None:
    """An early flush's EIO is the unpack's error, as a failed write's is; a file system that
    cannot flush one file (EINVAL) leaves it to the commit's syncfs."""
    import errno

    code = [errno.EIO]

    def failing(fd: int) -> None:
        raise OSError(code[0], os.strerror(code[0]))

    monkeypatch.setattr(os, "fdatasync", failing)
    monkeypatch.setattr(writeback, "FLUSH_BYTES", 1 << 20)
    monkeypatch.setattr(writer_module, "WRITEBACK_BYTES", 1 << 20)
    piece = os.urandom(1 << 20)

    def write_two() -> None:
        with writing(threads) as writer:
            writer.open(tmp_path / "big", 0o644)
            for _ in range(2):
                writer.write(piece)
            writer.close()

    with pytest.raises(OSError, match="Input/output error"):
        write_two()
    assert not _flush_threads() and not _writer_threads()
    code[0] = errno.EINVAL
    write_two()
    assert (tmp_path / "big").read_bytes() == piece * 2
