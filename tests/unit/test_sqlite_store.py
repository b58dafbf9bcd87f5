"""SqliteStore: exact round trips, exactly-once replays and the optimistic offset check."""

from __future__ import annotations

import sqlite3
import uuid

import pytest

from events import CATALOG_TOPIC, OnDuplicate
from projector import (
    Changes,
    LogRecord,
    SqliteStore,
    StaleBatchError,
    Status,
    apply_batch,
    fold,
)
from projector.sqlite_store import TABLES

from .conftest import Log, MemoryCatalog, at, create, register


@pytest.fixture
def store(tmp_path):
    store = SqliteStore(tmp_path / "store.db")
    yield store
    store.close()


def dump(path) -> dict[str, list[tuple]]:
    """Every row of every table, in a fixed order, read through a separate connection."""
    conn = sqlite3.connect(path)
    try:
        return {table: conn.execute(f"select * from {table} order by {', '.join(pk)}").fetchall()
                for table, (_, pk) in TABLES.items()}
    finally:
        conn.close()


def history() -> tuple[uuid.UUID, list[LogRecord]]:
    """Two datasets, layers on two partitions, a replacement, rejections of every kind."""
    droid, other = uuid.uuid4(), uuid.uuid4()
    log = Log()
    log.append(create(droid, "droid", when=at(0.000001)))
    log.append(create(other, "other", when=at(1)))
    log.append(create(uuid.uuid4(), "droid", when=at(2)))  # name taken
    log.append(create(uuid.uuid4(), "", when=at(2)))  # invalid
    log.append(register(droid, "seg1", "base", when=at(3), properties=b"\x01\x02",
                        size_bytes=2**40), partition=0)
    log.append(register(droid, "seg1", "extra", when=at(4)), partition=0)
    log.append(register(droid, "seg2", "base", when=at(5)), partition=0)
    log.append(register(droid, "seg1", "base", when=at(6)), partition=0)  # duplicate: rejected
    log.append(register(droid, "seg1", "base", url="file:///v2.rrd", when=at(2.5),
                        on_duplicate=OnDuplicate.REPLACE), partition=0)
    log.append_raw(b"\x00\xffgarbage", partition=0, reason="not an event")
    log.append(register(other, "o1", "base", when=at(7)), partition=1)
    log.append(register(uuid.uuid4(), "o2", "base", when=at(8)), partition=1)  # unknown dataset
    return droid, log.records


def test_commit_then_read_back_what_the_fold_produced(store):
    droid, records = history()
    changes = fold(store, records)
    assert len(changes.rejections) == 3 and len(changes.outcomes) == 11

    store.commit(changes, expected_offsets={})

    assert store.next_offsets() == changes.next_offsets == {
        (CATALOG_TOPIC, 0): 4, (CATALOG_TOPIC, 0): 6, (CATALOG_TOPIC, 1): 2}
    assert store.next_offset(CATALOG_TOPIC, 0) == 6
    assert store.next_offset(CATALOG_TOPIC, 9) == 0

    assert store.datasets() == sorted(changes.datasets.values(),
                                      key=lambda d: (d.created_at, str(d.id)))
    for dataset in changes.datasets.values():
        assert store.dataset(dataset.id) == dataset
        assert store.dataset_by_name(dataset.name) == dataset
        expected_segments = sorted((s for s in changes.segments.values()
                                    if s.dataset_id == dataset.id), key=lambda s: s.created_by)
        assert store.segments(dataset.id) == expected_segments
        rank = {s.segment_id: i for i, s in enumerate(expected_segments)}
        expected_layers = sorted((x for x in changes.layers.values() if x.dataset_id == dataset.id),
                                 key=lambda x: (rank[x.segment_id], x.registered_by))
        assert store.layers(dataset.id) == expected_layers
    assert [x.layer_name for x in store.layers(droid) if x.segment_id == "seg1"] == [
        "extra", "base"]
    for key, layer in changes.layers.items():
        assert store.layer(*key) == layer
    for key, segment in changes.segments.items():
        assert store.segment(*key) == segment
    for event_id, outcome in changes.outcomes.items():
        assert store.outcome(event_id) == outcome
        assert store.has_outcome(event_id)
    assert store.rejections() == sorted(changes.rejections, key=lambda r: r.position)
    assert store.outcome(uuid.uuid4()) is None
    assert not store.has_outcome(uuid.uuid4())
    assert store.dataset(uuid.uuid4()) is None and store.dataset_by_name("nope") is None


def test_times_and_bytes_round_trip_exactly(store):
    droid, records = history()
    changes = fold(store, records)
    store.commit(changes, expected_offsets={})

    dataset = store.dataset(droid)
    assert dataset.created_at == at(0.000001)
    assert dataset.created_at.microsecond == at(0.000001).microsecond
    assert dataset.created_at.utcoffset() is not None
    layer = store.layer(droid, "seg1", "extra")
    assert layer.registered_at == at(4)
    assert store.layer(droid, "seg2", "base").properties == b""
    [replaced] = [x for x in changes.layers.values() if x.storage_url == "file:///v2.rrd"]
    stored = store.layer(droid, "seg1", "base")
    assert stored == replaced
    assert stored.registered_at == at(2.5)
    assert isinstance(stored.properties, bytes) and isinstance(stored.arrow_schema, bytes)
    [garbage] = [r for r in store.rejections() if r.event_id is None]
    assert (garbage.raw, garbage.reason) == (b"\x00\xffgarbage", "not an event")


def test_the_store_reopened_read_only_sees_the_same(store, tmp_path):
    droid, records = history()
    apply_batch(store, records)
    reader = SqliteStore(tmp_path / "store.db", read_only=True)
    try:
        assert reader.next_offsets() == store.next_offsets()
        assert reader.layers(droid) == store.layers(droid)
        with pytest.raises(sqlite3.OperationalError):
            reader.commit(Changes(next_offsets={(CATALOG_TOPIC, 0): 99}),
                          expected_offsets=reader.next_offsets())
    finally:
        reader.close()


def test_apply_batch_twice_changes_nothing_the_second_time(tmp_path):
    path = tmp_path / "store.db"
    _, records = history()
    first = SqliteStore(path)
    changes = apply_batch(first, records)
    assert changes.outcomes
    first.close()
    before = dump(path)
    assert before["outcomes"] and before["layers"] and before["rejections"]

    restarted = SqliteStore(path)  # a new process replays the same batch after a crash
    try:
        again = apply_batch(restarted, records)
    finally:
        restarted.close()

    assert dump(path) == before
    assert again.outcomes == {} and again.layers == {} and again.rejections == []


def by_topic(records):
    """The history's entries records and layers records, each in log order."""
    return ([r for r in records if r.position.topic == CATALOG_TOPIC],
            [r for r in records if r.position.topic == CATALOG_TOPIC])


def test_overlapping_replay_equals_a_single_batch(tmp_path):
    _, records = history()
    entries, layers = by_topic(records)

    once = SqliteStore(tmp_path / "once.db")
    apply_batch(once, records)
    once.close()

    replayed = SqliteStore(tmp_path / "replayed.db")
    apply_batch(replayed, entries + layers[:4])
    apply_batch(replayed, entries + layers[2:])  # a batch that overlaps the committed one
    replayed.close()

    assert dump(tmp_path / "replayed.db") == dump(tmp_path / "once.db")


def test_rebuild_in_other_batches_gives_identical_tables(tmp_path):
    # DESIGN invariant 1, through the real store: entries first, then layers one record at a time.
    _, records = history()
    entries, layers = by_topic(records)

    live = SqliteStore(tmp_path / "live.db")
    apply_batch(live, records)
    live.close()
    rebuilt = SqliteStore(tmp_path / "rebuilt.db")
    apply_batch(rebuilt, entries)
    for record in layers:
        apply_batch(rebuilt, [record])
    rebuilt.close()

    assert dump(tmp_path / "rebuilt.db") == dump(tmp_path / "live.db")


def test_commit_with_stale_offsets_raises_and_writes_nothing(store):
    droid, records = history()
    entries = [r for r in records if r.position.topic == CATALOG_TOPIC]
    layers = [r for r in records if r.position.topic == CATALOG_TOPIC]
    apply_batch(store, entries)
    before = dump(store.path)

    changes = fold(store, layers)
    assert changes.layers and changes.outcomes
    with pytest.raises(StaleBatchError):
        store.commit(changes, expected_offsets={})  # the store is at entries offset 4, not {}
    with pytest.raises(StaleBatchError):
        store.commit(changes, expected_offsets={(CATALOG_TOPIC, 0): 3})

    assert dump(store.path) == before
    assert store.layers(droid) == []
    # The store is still usable: the right expectation commits.
    store.commit(changes, expected_offsets={(CATALOG_TOPIC, 0): 4})
    assert store.next_offset(CATALOG_TOPIC, 0) == 6


def test_a_second_writer_loses_the_race(tmp_path):
    droid, records = history()
    a, b = SqliteStore(tmp_path / "store.db"), SqliteStore(tmp_path / "store.db")
    try:
        offsets = a.next_offsets()
        changes_a = fold(a, records[:4])
        changes_b = fold(b, records[:4])
        a.commit(changes_a, expected_offsets=offsets)
        before = dump(tmp_path / "store.db")
        with pytest.raises(StaleBatchError):
            b.commit(changes_b, expected_offsets=offsets)
        assert dump(tmp_path / "store.db") == before
    finally:
        a.close()
        b.close()


def test_fold_over_the_store_matches_fold_over_memory(store):
    # SqliteStore is a CatalogView that answers like the in-memory one between batches.
    _, records = history()
    memory = MemoryCatalog()
    for batch in (records[:4], records[4:8], records[8:]):
        from_memory = fold(memory, batch)
        from_store = apply_batch(store, batch)
        assert from_store == from_memory
        memory.apply(from_memory)
    assert {o.status for o in memory.outcomes.values()} == {Status.ACCEPTED, Status.REJECTED}
