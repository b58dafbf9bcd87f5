"""wait_for_positions: strictly past the awaited offset, bounded by a monotonic deadline.

The deadline is checked on a clock of the test's (``time.monotonic`` replaced), which moves only
when the fake store is asked to wait for a commit that never comes (or something sleeps): the
waits asked for and the reads made are then exact, whatever the load on the machine."""

from __future__ import annotations

import threading
import time
import uuid

import pytest

from events import CATALOG_TOPIC
from producers import Position
from projector import apply_batch, wait_for_positions
from projector.stores import sqlite
from projector.stores.sqlite import SqliteStore
from sdk.errors import ProjectionTimeoutError, StrataError

from .conftest import create, log_record

OTHER_TOPIC = "other.topic"  # wait_for_positions is not specific to strata's topic


class Clock:
    """A monotonic clock that stands still until told to move."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def advance(self, secs: float) -> None:
        self.now += secs


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    """The clock every deadline in the test is measured on, in place of ``time.monotonic``; a
    ``time.sleep`` moves it on instead of sleeping."""
    fake = Clock()
    monkeypatch.setattr(time, "monotonic", fake)
    monkeypatch.setattr(time, "sleep", fake.advance)
    return fake


class FakeStore:
    """A store whose next offsets follow a script: one dict per call, the last one repeating.

    ``timeouts`` records each ``wait_for_commit`` timeout asked for, and ``read_at`` the clock's
    time at each read of the offsets."""

    def __init__(self, clock: Clock, *offsets: dict[tuple[str, int], int]) -> None:
        self.clock = clock
        self.script = list(offsets)
        self.calls = 0
        self.timeouts: list[float] = []
        self.read_at: list[float] = []

    def next_offsets(self) -> dict[tuple[str, int], int]:
        self.calls += 1
        self.read_at.append(self.clock())
        return dict(self.script[min(self.calls, len(self.script)) - 1])

    def data_version(self) -> int:
        return 0

    def wait_for_commit(self, version: int, timeout_secs: float) -> int:
        """A commit at once while the script has offsets left to give; else none, after the whole
        timeout has passed on the clock."""
        self.timeouts.append(timeout_secs)
        assert len(self.timeouts) <= 100, f"waits in a loop without end: {self.timeouts[:5]}..."
        if self.calls < len(self.script):
            return version + 1
        self.clock.advance(timeout_secs)
        return version


def test_returns_at_once_when_the_store_is_past_the_offset(clock):
    store = FakeStore(clock, {(CATALOG_TOPIC, 1): 42})
    wait_for_positions(store, [Position(CATALOG_TOPIC, 1, 41)], timeout_secs=5)
    assert store.timeouts == []  # never waited
    assert store.calls == 1


def test_no_positions_returns_at_once(clock):
    store = FakeStore(clock, {})
    wait_for_positions(store, [], timeout_secs=0)
    assert store.timeouts == []
    assert store.calls == 1


@pytest.mark.parametrize("timeout", [0.3, None])
def test_waits_until_every_partition_is_past(clock, timeout):
    awaited = [Position(CATALOG_TOPIC, 0, 5), Position(CATALOG_TOPIC, 0, 3),
               Position(CATALOG_TOPIC, 1, 0), Position(OTHER_TOPIC, 0, 9)]
    store = FakeStore(
        clock,
        {},
        {(CATALOG_TOPIC, 0): 6},
        {(CATALOG_TOPIC, 0): 6, (CATALOG_TOPIC, 1): 1},  # the entries topic is still at 0
        {(CATALOG_TOPIC, 0): 6, (CATALOG_TOPIC, 1): 1, (OTHER_TOPIC, 0): 9},  # == is not past
        {(CATALOG_TOPIC, 0): 6, (CATALOG_TOPIC, 1): 1, (OTHER_TOPIC, 0): 10},
    )
    wait_for_positions(store, awaited, timeout_secs=timeout)
    assert store.calls == 5
    assert len(store.timeouts) == 4  # one wait for a commit after each read that was behind
    if timeout is not None:  # no wait beyond what is left before the deadline
        assert all(0 < t <= timeout for t in store.timeouts), store.timeouts


def test_next_offset_equal_to_the_awaited_offset_times_out(clock):
    store = FakeStore(clock, {(CATALOG_TOPIC, 1): 41})
    awaited = Position(CATALOG_TOPIC, 1, 41)

    with pytest.raises(ProjectionTimeoutError) as info:
        wait_for_positions(store, [awaited], timeout_secs=0.3)

    # One wait for a commit, to the deadline and no further; then one more read, at the deadline.
    assert store.timeouts == [pytest.approx(0.3)]
    assert store.calls == 2  # read again at the deadline, as nothing was committed
    assert store.read_at == [0.0, pytest.approx(0.3)]
    assert clock.now == pytest.approx(0.3)
    error = info.value
    assert isinstance(error, TimeoutError) and isinstance(error, StrataError)
    message = str(error)
    assert CATALOG_TOPIC in message
    assert "[1]" in message
    assert "offset 41" in message
    assert "next offset: 41" in message
    assert error.awaited == [awaited]
    assert error.reached == {(CATALOG_TOPIC, 1): 41}


def test_a_long_wait_reads_again_after_each_slice_and_ends_at_the_deadline(clock):
    store = FakeStore(clock, {(CATALOG_TOPIC, 0): 0})

    with pytest.raises(ProjectionTimeoutError):
        wait_for_positions(store, [Position(CATALOG_TOPIC, 0, 0)], timeout_secs=3.5)

    # Several waits, none past the deadline, together exactly the time given; a read after each.
    assert len(store.timeouts) > 1 and all(t > 0 for t in store.timeouts), store.timeouts
    assert sum(store.timeouts) == pytest.approx(3.5)
    assert store.calls == len(store.timeouts) + 1
    assert store.read_at[-1] == pytest.approx(3.5)


def test_timeout_message_names_only_the_partitions_behind(clock):
    store = FakeStore(clock, {(CATALOG_TOPIC, 0): 100, (CATALOG_TOPIC, 2): 17})
    awaited = [Position(CATALOG_TOPIC, 0, 3), Position(CATALOG_TOPIC, 2, 57),
               Position(OTHER_TOPIC, 0, 4)]

    with pytest.raises(ProjectionTimeoutError) as info:
        wait_for_positions(store, awaited, timeout_secs=0.05)

    message = str(info.value)
    assert f"{CATALOG_TOPIC}[2] offset 57" in message
    assert "next offset: 17" in message
    assert f"{OTHER_TOPIC}[0] offset 4" in message
    assert "next offset: 0" in message  # a partition the store has never seen
    assert f"{CATALOG_TOPIC}[0]" not in message  # that one is done
    assert info.value.reached == {(CATALOG_TOPIC, 0): 100, (CATALOG_TOPIC, 2): 17,
                                  (OTHER_TOPIC, 0): 0}


def test_zero_timeout_checks_once(clock):
    store = FakeStore(clock, {})
    with pytest.raises(TimeoutError):
        wait_for_positions(store, [Position(CATALOG_TOPIC, 0, 0)], timeout_secs=0)
    assert store.timeouts == []  # no wait at all
    assert store.calls == 1


class CountingStore(SqliteStore):
    """A real store that counts how often its offsets are read."""

    reads = 0

    def next_offsets(self) -> dict[tuple[str, int], int]:
        self.reads += 1
        return super().next_offsets()


def test_on_a_real_store_offsets_are_read_again_only_after_a_commit(tmp_path):
    projector = SqliteStore(tmp_path / "store.db")
    client = CountingStore(tmp_path / "store.db", read_only=True)
    dataset_id = uuid.uuid4()
    record = log_record(create(dataset_id, "droid"), offset=0)
    done = threading.Event()
    waiter = threading.Thread(target=lambda: (
        wait_for_positions(client, [Position(CATALOG_TOPIC, 0, 0)], timeout_secs=30), done.set()))
    waiter.start()
    try:
        time.sleep(0.2)  # about 200 checks of the data version, and nothing committed
        assert client.reads == 1 and not done.is_set()
        apply_batch(projector, [record])
        assert done.wait(10)
        assert client.reads == 2
    finally:
        waiter.join(30)
        projector.close()
        client.close()


def test_a_reader_in_the_writer_s_process_is_woken_by_its_commit_not_by_polling(tmp_path, monkeypatch):
    # The projector's followers (changelog relay, Lance mirror, snapshotter) read the store from
    # the projector's own process: they check the file only every WRITER_POLL_SECS, here longer
    # than the wait, and are woken by the process's commit itself.
    monkeypatch.setattr(sqlite, "WRITER_POLL_SECS", 3600)
    projector = SqliteStore(tmp_path / "store.db")
    follower = SqliteStore(tmp_path / "store.db", read_only=True)
    version = follower.wait_for_commit(follower.data_version(), 0)
    woken: list[int] = []
    waiter = threading.Thread(target=lambda: woken.append(follower.wait_for_commit(version, 120)))
    waiter.start()
    try:
        time.sleep(0.2)  # the follower is waiting
        apply_batch(projector, [log_record(create(uuid.uuid4(), "droid"), offset=0)])
        waiter.join(60)  # half the wait's timeout: it did not end by timing out
        assert woken and woken[0] != version
    finally:
        waiter.join()
        projector.close()
        follower.close()
