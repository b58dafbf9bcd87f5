"""The client's worker processes (``recordings.workers``): tasks run in real worker processes and come
back as they would in process, a dead worker is replaced, and nothing outlives the pool."""

from __future__ import annotations

import functools
import os
import pickle
import signal
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from recordings import NotFoundError, WorkerError, WorkerPool, ipc_file, read_recording
from stack.droid import write_episode
from worker_tools import alive, assert_interrupt_leaves_no_worker

TIMEOUT_SECS = 60


@pytest.fixture
def pool() -> Iterator[WorkerPool]:
    workers = WorkerPool(2)
    yield workers
    workers.close()


def _wait_for_workers(pool: WorkerPool, count: int) -> list[int]:
    """Start the pool (its first task) and wait until ``count`` workers serve it."""
    pool.submit("starting", int, 0).result(TIMEOUT_SECS)
    deadline = time.monotonic() + TIMEOUT_SECS
    while len(pool.pids) < count or not pool._ready.is_set():
        assert time.monotonic() < deadline, "the workers did not start"
        time.sleep(0.05)
    return pool.pids



def test_a_segment_table_comes_back_from_a_worker_as_it_was_written(pool: WorkerPool) -> None:
    _wait_for_workers(pool, 2)
    table = pa.table({"step": list(range(100_000)), "name": [f"ep_{i}" for i in range(100_000)]})
    buffer = pool.submit("a big table", ipc_file, functools.partial(pa.table, table.to_pydict())
                         ).result(TIMEOUT_SECS)
    assert buffer.size > 512 << 10  # large enough to cross through a shared-memory file
    assert pa.ipc.open_file(buffer).read_all().equals(table)
    assert list((pool._directory or Path("/nonexistent")).glob("*.arrow")) == []  # unlinked at once


def test_what_a_worker_reads_equals_what_the_caller_reads(pool: WorkerPool, tmp_path: Path) -> None:
    """The schema of a DROID-like episode has non-null children of nested lists, which pyarrow's
    own pickling loses: its digest must not change on the way back."""
    uris = []
    for index in range(3):
        path = tmp_path / f"episode_{index}.rrd"
        write_episode(path, f"ep_{index}", index, steps=5)
        uris.append(path.as_uri())
    _wait_for_workers(pool, 2)
    remote = [pool.submit(uri, read_recording, uri).result(TIMEOUT_SECS) for uri in uris]
    local = [read_recording(uri) for uri in uris]
    for there, here in zip(remote, local, strict=True):
        assert there.arrow_schema.equals(here.arrow_schema, check_metadata=True)
        assert there.schema_bytes() == here.schema_bytes()
        assert there.properties is not None and there.properties.equals(here.properties)
        assert (there.recording_id, there.num_chunks, there.index_ranges) == (
            here.recording_id, here.num_chunks, here.index_ranges)


def test_a_task_s_error_is_raised_in_the_caller_and_the_worker_goes_on(pool: WorkerPool) -> None:
    pids = _wait_for_workers(pool, 2)
    with pytest.raises(NotFoundError, match="no file at file:///no/such/episode.rrd") as raised:
        pool.submit("reading", read_recording, "file:///no/such/episode.rrd").result(TIMEOUT_SECS)
    assert "in strata's worker process" in str(raised.value.__cause__)
    assert pool.submit("adding", int.__add__, 2, 3).result(TIMEOUT_SECS) == 5
    assert pool.pids == pids


def test_arguments_that_do_not_pickle_fail_their_task_only(pool: WorkerPool) -> None:
    _wait_for_workers(pool, 2)
    with pytest.raises((pickle.PicklingError, TypeError, AttributeError)):
        pool.submit("a lock", repr, threading.Lock()).result(TIMEOUT_SECS)
    assert pool.submit("adding", int.__add__, 2, 3).result(TIMEOUT_SECS) == 5


def test_a_worker_killed_mid_task_is_replaced_and_the_task_retried_once() -> None:
    pool = WorkerPool(1)
    try:
        [pid] = _wait_for_workers(pool, 1)
        future = pool.submit("sleeping", time.sleep, 1.5)
        time.sleep(0.5)
        os.kill(pid, signal.SIGKILL)
        assert future.result(TIMEOUT_SECS) is None  # done by the replacement
        [replacement] = pool.pids
        assert replacement != pid
        assert pool.submit("adding", int.__add__, 2, 3).result(TIMEOUT_SECS) == 5
    finally:
        pool.close()


def test_a_task_that_kills_every_worker_fails_naming_what_it_did(pool: WorkerPool) -> None:
    _wait_for_workers(pool, 2)
    with pytest.raises(WorkerError, match=r'segment "ep_7": .*died while reading it, twice \(pid \d+, '
                                          r"exit status 3\)"):
        pool.submit('segment "ep_7"', os._exit, 3).result(TIMEOUT_SECS)
    assert pool.submit("adding", int.__add__, 2, 3).result(TIMEOUT_SECS) == 5  # the next call works


def test_closing_stops_every_worker_and_cancels_what_waits() -> None:
    pool = WorkerPool(2)
    pids = _wait_for_workers(pool, 2)
    running = [pool.submit("sleeping", time.sleep, 30) for _ in range(6)]
    time.sleep(0.3)
    pool.close()
    assert not any(alive(pid) for pid in pids)
    for future in running:  # none was waited for: a finished sleep would have a result
        assert future.cancelled() or isinstance(future.exception(TIMEOUT_SECS), WorkerError)
    assert not pool.spreads(2)
    pool.close()  # idempotent


def test_work_is_spread_only_where_workers_can_speed_it_up() -> None:
    pool = WorkerPool(2)
    assert pool.spreads(2)
    assert not pool.spreads(1)  # one segment or file: no process is started for it
    assert not WorkerPool(0).spreads(100)
    for n in range(8):  # the caller's reading threads all start
        assert pool.submit("adding", int.__add__, 2, n, spread=False).result(TIMEOUT_SECS) == 2 + n
    assert pool.pids == [] and pool._directory is None  # in process, nothing was started
    pool.submit("starting", int, 0).result(TIMEOUT_SECS)
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # a forked child (a DataLoader worker) runs its tasks in process, on threads
        done = False  # of its own: its parent's are not in it
        try:
            done = not pool.spreads(2) and pool.submit("adding", int.__add__, 2, 3).result(10) == 5
        finally:
            os.write(write, b"1" if done else b"0")
            os._exit(0)
    os.waitpid(child, 0)
    assert os.read(read, 1) == b"1"
    pool.close()


def test_a_pool_started_before_its_first_task_serves_it_from_a_worker() -> None:
    """``start()`` (a server's, at start) returns at once and starts the workers, so that the
    first call finds them ready; a pool of none starts nothing."""
    idle = WorkerPool(0)
    idle.start()
    assert idle._directory is None and idle.pids == []
    pool = WorkerPool(1)
    try:
        pool.start()
        pool.start()  # once
        deadline = time.monotonic() + TIMEOUT_SECS
        while not pool.pids or not pool._ready.is_set():
            assert time.monotonic() < deadline, "the worker did not start before any task"
            time.sleep(0.05)
        [pid] = pool.pids
        assert pool.submit("its pid", os.getpid).result(TIMEOUT_SECS) == pid
    finally:
        pool.close()
    pool.start()  # closed: nothing
    assert pool.pids == []


@pytest.mark.parametrize("size", [-1, 1.5, True])
def test_a_pool_size_is_a_whole_number_of_at_least_zero(size: object) -> None:
    with pytest.raises(ValueError, match="at least 0"):
        WorkerPool(size)  # type: ignore[arg-type]


def test_ctrl_c_in_the_caller_leaves_no_worker_behind(tmp_path: Path) -> None:
    """A script stopped by SIGINT while its workers are busy exits, and takes them with it."""
    script = tmp_path / "busy.py"
    script.write_text(textwrap.dedent("""
        import sys, time
        from recordings import WorkerPool
        pool = WorkerPool(2)
        futures = [pool.submit("sleeping", time.sleep, 30) for _ in range(4)]
        while len(pool.pids) < 2 or not pool._ready.is_set():
            time.sleep(0.05)
        time.sleep(0.3)
        print(*pool.pids, flush=True)
        for future in futures:
            future.result()
    """))
    assert_interrupt_leaves_no_worker(script)


def test_without_workers_that_start_the_caller_does_the_work(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "executable", "/bin/false")  # every worker exits at once
    pool = WorkerPool(2)
    try:
        with pytest.warns(RuntimeWarning, match=r"could not start a worker process \(pid \d+, exit status 1"):
            assert pool.submit("adding", int.__add__, 2, 3).result(TIMEOUT_SECS) == 5
            futures = [pool.submit("adding", int.__add__, n, 1) for n in range(10)]
            assert [f.result(TIMEOUT_SECS) for f in futures] == list(range(1, 11))
            deadline = time.monotonic() + TIMEOUT_SECS
            while pool._lanes:  # both slots gave up
                assert time.monotonic() < deadline
                time.sleep(0.05)
        assert pool.pids == []
    finally:
        pool.close()


def test_when_no_replacement_starts_the_caller_takes_over(monkeypatch: pytest.MonkeyPatch) -> None:
    pool = WorkerPool(1)
    try:
        [pid] = _wait_for_workers(pool, 1)
        monkeypatch.setattr(sys, "executable", "/bin/false")
        os.kill(pid, signal.SIGKILL)
        with pytest.warns(RuntimeWarning, match="could not start a worker process"):
            # The first task may reach the socket before the kernel closed the dead worker's
            # end, and then counts as the one it died doing: it fails rather than run here.
            first = pool.submit("adding", int.__add__, 2, 3)
            error = first.exception(TIMEOUT_SECS)
            assert isinstance(error, WorkerError) if error else first.result() == 5
            assert pool.submit("adding", int.__add__, 4, 5).result(TIMEOUT_SECS) == 9  # never waits forever
    finally:
        pool.close()


def test_the_pool_size_comes_from_strata_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    import settings

    monkeypatch.delenv("STRATA_WORKERS", raising=False)
    assert settings.workers() == len(os.sched_getaffinity(0))
    monkeypatch.setenv("STRATA_WORKERS", "0")
    assert settings.workers() == 0
    monkeypatch.setenv("STRATA_WORKERS", "3")
    assert settings.workers() == 3
    for bad in ("-1", "two"):
        monkeypatch.setenv("STRATA_WORKERS", bad)
        with pytest.raises(ValueError, match=f"STRATA_WORKERS='{bad}': set it to a number of worker"):
            settings.workers()
