"""The store contract, run on every backend (SQLite, PostgreSQL): exact round trips, exactly-once
replays, the optimistic offset check, read-only clients."""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import replace

import pyarrow as pa
import pytest

from events import (
    CATALOG_TOPIC,
    AssetMode,
    AssetScopeEdit,
    CreateSearchIndex,
    CreateTag,
    DeleteTable,
    DeleteTag,
    Event,
    MaintainSearchIndexes,
    OnDuplicate,
    ScopeAsset,
    SearchIndexKind,
)
from projector import (
    AssetScope,
    Changes,
    DatasetKind,
    LogRecord,
    SchemaRef,
    StaleBatchError,
    Status,
    StoreUnavailableError,
    apply_batch,
    companion_id,
    feed,
    fold,
    open_store,
    schemas,
)
from projector.layer_runs import materialized
from projector.stores import sql_commit, sql_rows
from projector.stores.sqlite import SqliteStore
from stores import PROJECTION_TABLES, applied_batches, assert_applied_exactly_once, catalog_reads, dump
from unit.conftest import (
    Log,
    MemoryCatalog,
    arrow_schema,
    at,
    create,
    create_table,
    delete,
    log_record,
    parsed,
    register,
    register_blueprint,
    rename,
    unregister,
    write,
)

SCHEMA_X = arrow_schema(("x", pa.int64()))
SCHEMA_Y = arrow_schema(("y", pa.string()))
SCHEMA_EMBEDDED = arrow_schema(
    pa.field("frame", pa.int64(), metadata={"rerun:kind": "index", "rerun:index_name": "frame"}),
    pa.field("/camera:embedding", pa.list_(pa.list_(pa.float32(), 4)),
             metadata={"rerun:kind": "data", "rerun:entity_path": "/camera", "rerun:component": "embedding"}))


def history() -> tuple[uuid.UUID, list[LogRecord]]:
    """Two datasets, layers with schemas, a replacement, a blueprint, an asset with its scope,
    rejections of every kind."""
    droid, other = uuid.uuid4(), uuid.uuid4()
    log = Log()
    log.append(create(droid, "droid", when=at(0.000001)))
    log.append(create(other, "other", when=at(1)))
    log.append(create(uuid.uuid4(), "droid", when=at(2)))  # name taken
    log.append(create(uuid.uuid4(), "", when=at(2)))  # invalid
    log.append(register(droid, "seg1", "base", when=at(3), properties=b"\x01\x02",
                        size_bytes=2**40, schema=SCHEMA_X))
    log.append(register(droid, "seg1", "extra", when=at(4), schema=SCHEMA_Y))
    log.append(register(droid, "seg2", "base", when=at(5)))
    log.append(register(droid, "seg1", "base", when=at(6)))  # duplicate: already exists
    log.append(register(droid, "seg1", "base", url="file:///v2.rrd", when=at(2.5),
                        on_duplicate=OnDuplicate.REPLACE, schema=SCHEMA_X))
    log.append_raw(b"\x00\xffgarbage", reason="not an event")
    log.append(register(other, "o1", "base", when=at(7)))
    log.append(register(uuid.uuid4(), "o2", "base", when=at(8)))  # unknown dataset
    log.append(register_blueprint(droid, "bp", when=at(9)))
    assets = companion_id(droid, DatasetKind.ASSET)
    log.append(register(assets, "mesh", "base", when=at(9), num_chunks=2))
    log.append(Event(assets, ScopeAsset("mesh", AssetScopeEdit.SET, AssetMode.OPT_IN, ("seg1",)),
                     produced_at=at(9)))
    log.append(Event(droid, CreateTag("before-v2", 8), produced_at=at(9)))
    log.append(Event(droid, CreateTag("moved", 3), produced_at=at(9)))
    log.append(Event(droid, DeleteTag("moved"), produced_at=at(9)))
    indexed = uuid.uuid4()
    log.append(create(indexed, "indexed", when=at(9)))
    log.append(register(indexed, "i1", "base", when=at(9), schema=SCHEMA_EMBEDDED))
    log.append(Event(indexed, CreateSearchIndex("/camera", "embedding", "frame", SearchIndexKind.VECTOR,
                                              num_sub_vectors=2), produced_at=at(9)))
    log.append(Event(indexed, MaintainSearchIndexes(optimize_indexes=True), produced_at=at(9)))
    log.append(Event(indexed, CreateSearchIndex("/camera", "nothing", "frame", SearchIndexKind.FULL_TEXT),
                     produced_at=at(9)))  # no such column
    return droid, log.records + table_history(len(log.records))


def table_history(start: int = 0) -> list[LogRecord]:
    """Tables: writes of every mode, a write in parts, bad writes, a table overwritten then
    deleted, a write whose last part never came."""
    labels, gone = uuid.uuid4(), uuid.uuid4()
    log = Log()
    log.records = [None] * start  # offsets continue after ``start`` records
    log.append(create_table(labels, "labels", when=at(10)))
    log.append(create_table(uuid.uuid4(), "droid", when=at(10)))  # the name is a dataset's
    log.append(write(labels, "append", [{"id": i, "label": f"a{i}"} for i in range(5)], when=at(11)))
    log.append(write(labels, "upsert", [{"id": 3, "label": "x"}, {"id": 9, "label": "y"},
                                        {"id": 3, "label": "z"}], when=at(12)))
    log.append(write(labels, "append", [{"id": 1, "label": None}], write_id="w", parts=2, when=at(13)))
    log.append(write(labels, "append", [{"id": 2, "label": "b"}], write_id="w", part=1, parts=2, when=at(13)))
    log.append(write(labels, "append", b"not arrow", when=at(14)))  # invalid
    log.append(write(labels, "upsert", [{"id": 7, "label": "p"}], write_id="open", parts=3, when=at(15)))
    log.append(create_table(gone, "gone", when=at(16)))
    log.append(write(gone, "append", [{"id": 1, "label": "g"}], when=at(16)))
    log.append(write(gone, "overwrite", [{"id": 2, "label": "h"}], when=at(16)))
    log.append(Event(gone, DeleteTable(), produced_at=at(17)))
    return log.records[start:]


def test_commit_then_read_back_what_the_fold_produced(store):
    droid, records = history()
    changes = fold(store, records)
    assert len(changes.rejections) == 5 and len(changes.outcomes) == 34

    store.commit(changes, expected_offsets={})

    assert store.next_offsets() == changes.next_offsets == {(CATALOG_TOPIC, 0): 35}
    assert store.next_offset(CATALOG_TOPIC, 0) == 35
    [indexed] = [d.id for d in store.datasets() if d.name == "indexed"]
    [index] = store.search_indexes(indexed)
    assert (index.column, index.created_offset, index.maintained_offset) == ("/camera:embedding", 20, 21)
    assert index.maintenance == MaintainSearchIndexes(optimize_indexes=True)
    assert [(t.name, t.offset) for t in store.tags(droid)] == [("before-v2", 8)]
    assert store.next_offset(CATALOG_TOPIC, 9) == 0

    assert store.datasets() == sorted((d for d in changes.datasets.values() if not d.deleted),
                                      key=lambda d: (d.created_at, str(d.id)))
    for dataset in changes.datasets.values():
        assert store.dataset(dataset.id) == dataset
        assert store.dataset_by_name(dataset.name) == (None if dataset.deleted else dataset)
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
    wanted = {droid: {"seg1", "seg2", "no-such-segment"}, uuid.uuid4(): {"seg1"}}
    assert store.segments_with_layers(wanted) == (
        {k: s for k, s in changes.segments.items() if k[0] == droid},
        {k: x for k, x in changes.layers.items() if k[0] == droid})
    blueprints = store.dataset(companion_id(droid, DatasetKind.BLUEPRINT))
    assert blueprints.kind is DatasetKind.BLUEPRINT and blueprints.hidden
    assert [s.segment_id for s in store.segments(blueprints.id)] == ["bp"]
    assert store.dataset(droid).default_blueprint == "bp"
    assets = companion_id(droid, DatasetKind.ASSET)
    scoped = next(r for r in records if r.event is not None and isinstance(r.event.command, ScopeAsset))
    assert store.asset_scopes(assets) == [
        AssetScope(assets, "mesh", AssetMode.OPT_IN, ("seg1",), scoped.position.offset + 1)]
    for digest, schema_bytes in changes.schemas.items():
        assert store.schema(digest) == schema_bytes
    assert set(changes.schemas) == {schemas.digest(s) for s in (SCHEMA_X, SCHEMA_Y, SCHEMA_EMBEDDED)}
    [labels] = store.tables()
    assert store.table_by_name("labels") == labels == changes.tables[labels.id]
    assert store.table_by_name("gone") is None and any(t.deleted for t in changes.tables.values())
    assert store.table_data(labels).to_pylist() == [
        {"id": i, "label": label} for i, label in [(0, "a0"), (1, "a1"), (2, "a2"), (4, "a4"), (9, "y"),
                                                   (3, "z"), (1, None), (2, "b")]]
    assert labels.revision == 3
    assert [p.part for p in store.table_parts(labels.id, "open")] == [0]
    assert store.schema("0" * 64) is None
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
    assert dataset.schema == changes.datasets[droid].schema
    # In order of the current layers' registrations: seg1/base was replaced after seg1/extra.
    assert parsed(dataset.schema).names == ["y", "x"]
    assert dataset.schema_refs == (SchemaRef(schemas.digest(SCHEMA_Y), 1),
                                   SchemaRef(schemas.digest(SCHEMA_X), 1))
    layer = store.layer(droid, "seg1", "extra")
    assert layer.registered_at == at(4)
    assert layer.schema_sha256 == schemas.digest(SCHEMA_Y)
    assert store.layer(droid, "seg2", "base").properties == b""
    assert store.layer(droid, "seg2", "base").schema_sha256 == ""
    [replaced] = [x for x in changes.layers.values() if x.storage_url == "file:///v2.rrd"]
    stored = store.layer(droid, "seg1", "base")
    assert stored == replaced
    assert stored.registered_at == at(2.5)
    assert isinstance(stored.properties, bytes) and stored.properties == b""
    assert store.schema(stored.schema_sha256) == SCHEMA_X
    other = store.dataset_by_name("other")
    assert (other.schema, other.schema_refs, other.default_blueprint) == (b"", (), None)
    [garbage] = [r for r in store.rejections() if r.event_id is None]
    assert (garbage.raw, garbage.reason) == (b"\x00\xffgarbage", "not an event")


def test_the_store_reopened_read_only_sees_the_same(store, open_named):
    droid, records = history()
    apply_batch(store, records)
    reader = open_named("store", read_only=True)
    try:
        assert reader.next_offsets() == store.next_offsets()
        assert reader.layers(droid) == store.layers(droid)
        with pytest.raises(StoreUnavailableError, match="read-?only"):
            reader.commit(Changes(next_offsets={(CATALOG_TOPIC, 0): 99}),
                          expected_offsets=reader.next_offsets())
    finally:
        reader.close()


def test_apply_batch_twice_changes_nothing_the_second_time(open_named, locate):
    path = locate("store")
    _, records = history()
    first = open_named("store")
    changes = materialized(apply_batch(first, records))
    assert changes.outcomes
    first.close()
    before = dump(path)
    assert before["outcomes"] and before["layers"] and before["rejections"]

    restarted = open_named("store")  # a new process replays the same batch after a crash
    try:
        again = materialized(apply_batch(restarted, records))
    finally:
        restarted.close()

    assert dump(path) == before
    assert again.outcomes == {} and again.layers == {} and again.rejections == []


def test_overlapping_replay_equals_a_single_batch(open_named, locate):
    _, records = history()

    once = open_named("once")
    apply_batch(once, records)
    once.close()

    replayed = open_named("replayed")
    apply_batch(replayed, records[:6])
    apply_batch(replayed, records[3:])  # a batch that overlaps the committed one
    replayed.close()

    assert dump(locate("replayed")) == dump(locate("once"))


def test_overlapping_batches_are_folded_exactly_once(open_named, locate):
    # What a restarted projector is handed: records the store already applied, then new ones.
    _, records = history()
    store = open_named("store")
    apply_batch(store, records[:6])
    apply_batch(store, records[3:])
    apply_batch(store, records)
    store.close()
    assert applied_batches(locate("store")) == [
        (CATALOG_TOPIC, 0, 0, 6, 6), (CATALOG_TOPIC, 0, 6, len(records), len(records) - 6)]
    assert_applied_exactly_once(locate("store"), {(CATALOG_TOPIC, 0): len(records)})


def test_rebuild_in_other_batches_gives_identical_tables(open_named, locate):
    # DESIGN invariant 1, through the real store: one record at a time against one batch.
    _, records = history()

    live = open_named("live")
    apply_batch(live, records)
    live.close()
    rebuilt = open_named("rebuilt")
    for record in records:
        apply_batch(rebuilt, [record])
    rebuilt.close()

    live_tables = dump(locate("live"))
    assert all(live_tables[table] for table in PROJECTION_TABLES)  # every table has rows to compare
    assert dump(locate("rebuilt")) == live_tables


def test_a_replay_sized_batch_gives_the_tables_of_small_batches(open_named, locate):
    # Large batches take the backends' bulk paths (PostgreSQL: COPY, one array per lookup).
    droid, records = history()
    log = Log()
    log.records = [None] * len(records)
    for i in range(1500):
        log.append(register(droid, f"bulk-{i:05d}", "base", when=at(20)))
        log.append(register(droid, f"bulk-{i:05d}", "extra", when=at(21), schema=SCHEMA_Y))
    for i in range(0, 1500, 100):  # refused (already exists), and replaced
        log.append(register(droid, f"bulk-{i:05d}", "base", when=at(22)))
        log.append(register(droid, f"bulk-{i:05d}", "extra", url="file:///v2.rrd", when=at(23),
                            on_duplicate=OnDuplicate.REPLACE))
    records += log.records[len(records):]

    whole = open_named("whole")
    apply_batch(whole, records)
    whole.close()
    small = open_named("small")
    for start in range(0, len(records), 100):
        apply_batch(small, records[start:start + 100])
    small.close()
    assert dump(locate("whole")) == dump(locate("small"))


def test_commit_with_stale_offsets_raises_and_writes_nothing(store):
    droid, records = history()
    apply_batch(store, records[:4])
    before = dump(store.location)

    changes = fold(store, records[4:])
    assert changes.layers and changes.outcomes
    with pytest.raises(StaleBatchError):
        store.commit(changes, expected_offsets={})  # the store is at offset 4, not {}
    with pytest.raises(StaleBatchError):
        store.commit(changes, expected_offsets={(CATALOG_TOPIC, 0): 3})

    assert dump(store.location) == before
    assert store.layers(droid) == []
    # The store is still usable: the right expectation commits.
    store.commit(changes, expected_offsets={(CATALOG_TOPIC, 0): 4})
    assert store.next_offset(CATALOG_TOPIC, 0) == 35


def test_a_second_writer_loses_the_race(open_named, locate):
    droid, records = history()
    a, b = open_named("store"), open_named("store")
    try:
        offsets = a.next_offsets()
        changes_a = fold(a, records[:4])
        changes_b = fold(b, records[:4])
        a.commit(changes_a, expected_offsets=offsets)
        before = dump(locate("store"))
        with pytest.raises(StaleBatchError):
            b.commit(changes_b, expected_offsets=offsets)
        assert dump(locate("store")) == before
    finally:
        a.close()
        b.close()


def test_a_commit_waits_for_a_concurrent_one_and_then_finds_its_batch_stale(open_named, locate, monkeypatch):
    # Two writers check the same offsets at the same time: the store's write lock makes the
    # second one check only after the first has committed.
    _, records = history()
    a, b = open_named("store"), open_named("store")
    offsets = a.next_offsets()
    changes_a, changes_b = fold(a, records[:4]), fold(b, records[:4])
    inside = threading.Event()
    rewrite = sql_commit.rewrite_chunks

    def slow_rewrite(database, chunks):  # a's transaction stays open, its offsets checked, for 0.5 s
        inside.set()
        time.sleep(0.5)
        rewrite(database, chunks)

    monkeypatch.setattr(sql_commit, "rewrite_chunks", slow_rewrite)
    first = threading.Thread(target=a.commit, args=(changes_a,), kwargs={"expected_offsets": offsets})
    first.start()
    try:
        assert inside.wait(10)
        with pytest.raises(StaleBatchError):
            b.commit(changes_b, expected_offsets=offsets)
    finally:
        first.join(30)
    assert_applied_exactly_once(locate("store"), {(CATALOG_TOPIC, 0): 4})


def test_a_batch_is_folded_again_when_the_store_moves_on_during_its_fold(open_named, locate):
    # A swap (or another writer) commits between the batch's fold and its commit: the batch is
    # folded again over the new state, skipping what the store now holds.
    _, records = history()
    live, other = open_named("live"), open_named("live")
    moved = False
    view = live.batch_view

    def batch_view(fresh):
        nonlocal moved
        if not moved:
            moved = True
            apply_batch(other, records[:10])
        return view(fresh)

    live.batch_view = batch_view
    try:
        apply_batch(live, records)
        apply_batch(other, records)  # nothing left to apply
    finally:
        live.close()
        other.close()
    expected = open_named("expected")
    apply_batch(expected, records)
    end = expected.next_offsets()
    expected.close()
    assert dump(locate("live")) == dump(locate("expected"))
    assert_applied_exactly_once(locate("live"), end)


def test_a_replacement_that_fails_partway_changes_nothing(open_named, locate):
    _, records = history()
    live, ahead = open_named("live"), open_named("ahead")
    apply_batch(live, records[:10])
    apply_batch(ahead, records)
    before = dump(locate("live"))

    class CutShort:
        """Contents whose outcomes cannot be read, after the tables before them were."""

        def next_offsets(self):
            return ahead.next_offsets()

        def contents_of(self, table):
            if table == "outcomes":
                raise OSError("outcomes.arrow: no such file")
            return ahead.contents_of(table)

    with pytest.raises(OSError, match="outcomes.arrow"):
        live.replace_contents(CutShort())
    assert dump(locate("live")) == before
    assert live.replace_contents(ahead)
    assert dump(locate("live")) == dump(locate("ahead"))


def test_replace_contents_copies_a_store_that_has_applied_at_least_as_much(open_named, locate):
    _, records = history()
    live, ahead, behind = (open_named(name) for name in ("live", "ahead", "behind"))
    apply_batch(live, records[:10])
    apply_batch(ahead, records)
    apply_batch(behind, records[:5])
    before = dump(locate("live"))
    assert not live.replace_contents(behind)
    assert dump(locate("live")) == before
    assert live.replace_contents(ahead)
    assert dump(locate("live")) == dump(locate("ahead"))
    apply_batch(live, records)  # a projector's batch from before the swap: already held
    assert dump(locate("live")) == dump(locate("ahead"))
    for store in (live, ahead, behind):
        store.close()


def test_fold_over_the_store_matches_fold_over_memory(store):
    # The store is a FoldReader that answers like the in-memory one between batches.
    _, records = history()
    memory = MemoryCatalog()
    for batch in (records[:4], records[4:8], records[8:]):
        from_memory = fold(memory, batch)
        from_store = apply_batch(store, batch)
        assert materialized(from_store) == from_memory
        memory.apply(from_memory)
    assert {o.status for o in memory.outcomes.values()} == {
        Status.ACCEPTED, Status.ALREADY_EXISTS, Status.INVALID, Status.NOT_FOUND}
    # The store's feed is the fold's, read back in feed order with the commit's time.
    stored = store.changes()
    assert all(c.committed_at is not None for c in stored)
    assert [replace(c, committed_at=None) for c in stored] == memory.feed


# -- removals: None values and purged datasets ------------------------------------------------------


def test_delete_purges_the_dataset_from_every_table_but_keeps_a_tombstone(store):
    droid, records = history()
    apply_batch(store, records)
    blueprints = companion_id(droid, DatasetKind.BLUEPRINT)
    assert store.layers(droid) and store.segments(droid) and store.segments(blueprints)
    log_end = len(records)
    deletion = delete(droid, when=at(20))

    apply_batch(store, [log_record(deletion, log_end)])

    tables = dump(store.location)
    owned = {str(droid), str(blueprints), str(companion_id(droid, DatasetKind.ASSET))}
    droid_rows = {table: [row for row in rows if owned & set(row)]
                  for table, rows in tables.items() if table in ("segments", "layers", "asset_scopes")}
    assert droid_rows == {"segments": [], "layers": [], "asset_scopes": []}
    assert store.segments(droid) == [] and store.layers(droid) == [] and store.segments(blueprints) == []
    assert store.segment(droid, "seg1") is None and store.layer(droid, "seg1", "base") is None
    assert store.dataset(blueprints).deleted
    tombstone = store.dataset(droid)
    assert tombstone.deleted and tombstone.updated_at == at(20)
    assert (tombstone.schema, tombstone.schema_refs, tombstone.default_blueprint) == (b"", (), None)
    assert store.dataset_by_name("droid") is None
    assert [d.name for d in store.datasets() if not d.hidden] == ["other", "indexed"]
    # The other dataset and the content-addressed schemas are untouched.
    assert [x.segment_id for x in store.layers(store.dataset_by_name("other").id)] == ["o1"]
    assert store.schema(schemas.digest(SCHEMA_X)) == SCHEMA_X


def test_the_catalog_as_of_an_offset_is_the_log_prefix_rebuilt(open_named):
    droid, records = history()
    records.append(log_record(delete(droid, when=at(20)), len(records)))
    store = open_named("store")
    for start in range(0, len(records), 4):
        apply_batch(store, records[start:start + 4])
    entry_ids = [droid, *(companion_id(droid, kind) for kind in DatasetKind), *(t.id for t in store.tables())]
    for k in (0, 1, 5, 9, 13, 17, 22, len(records) - 1, len(records)):
        prefix = open_named(f"prefix{k}")
        apply_batch(prefix, records[:k])
        assert catalog_reads(store.at(k), entry_ids) == catalog_reads(prefix, entry_ids), f"as of {k}"
    before, after = store.at(len(records) - 1), store.at(len(records))
    assert not before.dataset(droid).deleted and after.dataset(droid).deleted
    assert {x.storage_url for x in before.layers(droid) if x.segment_id == "seg1"} >= {"file:///v2.rrd"}
    assert after.layers(droid) == [] and store.layers(droid) == []


def test_a_deleted_name_can_be_taken_again(store):
    droid, records = history()
    apply_batch(store, records)
    successor = uuid.uuid4()
    apply_batch(store, [log_record(delete(droid), len(records)),
                        log_record(create(successor, "droid", when=at(30)), len(records) + 1)])

    assert store.dataset_by_name("droid").id == successor
    assert store.dataset(droid).deleted
    assert [d.id for d in store.datasets() if d.name == "droid"] == [successor]


def test_removed_layers_and_segments_are_deleted_rows(store):
    droid, records = history()
    apply_batch(store, records)
    n = len(records)
    apply_batch(store, [log_record(unregister(droid, ["seg1"], ["base"]), n),
                        log_record(unregister(droid, ["seg2"]), n + 1)])

    assert store.layer(droid, "seg1", "base") is None
    assert [(x.segment_id, x.layer_name) for x in store.layers(droid)] == [("seg1", "extra")]
    assert store.segment(droid, "seg2") is None
    assert [s.segment_id for s in store.segments(droid)] == ["seg1"]
    assert store.dataset(droid).schema_refs == (SchemaRef(schemas.digest(SCHEMA_Y), 1),)
    assert parsed(store.dataset(droid).schema).names == ["y"]


def test_renamed_dataset_is_found_by_its_new_name_only(store):
    droid, records = history()
    apply_batch(store, records)
    apply_batch(store, [log_record(rename(droid, "droid v2", when=at(40)), len(records))])

    assert store.dataset_by_name("droid") is None
    renamed = store.dataset_by_name("droid v2")
    assert (renamed.id, renamed.updated_at, renamed.created_at) == (droid, at(40), at(0.000001))


@pytest.mark.parametrize("segments, layers, removed", [
    (["seg-0042"], [], 2), (["seg-0042", "seg-0007"], ["extra"], 2), ([], ["nowhere"], 0),
], ids=["one-segment", "one-layer-of-two-segments", "an-unknown-layer"])
def test_unregister_reads_only_the_layers_it_removes(store, monkeypatch, segments, layers, removed):
    droid = uuid.uuid4()
    events = [create(droid, "droid")] + [register(droid, f"seg-{i:04d}", name)
                                         for i in range(300) for name in ("base", "extra")]
    apply_batch(store, [log_record(e, offset) for offset, e in enumerate(events)])
    read = []
    real = sql_rows.layer
    monkeypatch.setattr(sql_rows, "layer", lambda row: read.append(row) or real(row))

    changes = apply_batch(store, [log_record(unregister(droid, segments, layers), len(events))])

    assert sum(layer is None for layer in changes.layers.values()) == removed
    # The layers removed, then their segments' layers (two each), to see whether any is left.
    assert len(read) <= 3 * removed
    assert len(store.layers(droid)) == 600 - removed


def test_a_waiting_reader_wakes_when_the_projector_commits(store, open_named):
    _, records = history()
    reader = open_named("store", read_only=True)
    version = reader.data_version()
    started = time.monotonic()
    assert reader.wait_for_commit(version, 0.3) == version  # nothing committed: the timeout
    assert time.monotonic() - started >= 0.29

    timer = threading.Timer(0.3, apply_batch, (store, records[:5]))
    timer.start()
    woken = reader.wait_for_commit(version, 60)
    seen = reader.next_offsets()  # read at once: the commit it woke for is there, not before it
    timer.join()
    assert woken != version, "returned at the timeout, not on the commit"
    assert seen == {(CATALOG_TOPIC, 0): 5}


def test_a_rebuilt_sqlite_store_replaces_the_contents_of_either_backend(store, tmp_path):
    # What 'strata replay --swap' does: it rebuilds into a SQLite file, whatever the live store.
    _, records = history()
    apply_batch(store, records[:10])
    rebuilt = SqliteStore(tmp_path / "rebuilt.db")
    try:
        apply_batch(rebuilt, records)
        assert store.replace_contents(rebuilt)
        assert dump(store.location) == dump(rebuilt.location)
    finally:
        rebuilt.close()


# -- the change feed ------------------------------------------------------------------------------


def test_a_reader_following_the_feed_sees_each_change_once_in_order_and_resumes(store, open_named):
    droid, records = history()
    reader = open_named("store", read_only=True)
    seen: list = []
    follower = threading.Thread(
        target=lambda: seen.extend(feed.follow(reader, (-1, 0), timeout_secs=3)), daemon=True)
    follower.start()
    for offset, record in enumerate(records):  # one commit per record while the reader follows
        apply_batch(store, [record])
        if offset % 5 == 0:
            time.sleep(0.01)
    follower.join(timeout=30)
    assert not follower.is_alive()

    everything = store.changes(limit=10_000)
    assert len(everything) > len(records) / 2
    assert seen == everything
    # Stopping anywhere and resuming from the last change seen gives the rest, each once.
    for stop in (0, 1, len(everything) // 2, len(everything) - 1):
        rest = list(feed.follow(reader, everything[stop].cursor, timeout_secs=0))
        assert rest == everything[stop + 1:]
    # From an offset: the changes of the records from that offset on.
    middle = records[len(records) // 2].position.offset
    assert list(feed.follow(reader, feed.start(reader, middle), timeout_secs=0)) == [
        c for c in everything if c.position.offset >= middle]
    # One dataset's changes only.
    assert list(feed.follow(reader, (-1, 0), entry_id=droid, timeout_secs=0)) == [
        c for c in everything if c.entry_id == droid]
    # Pages: a small page size gives the same entries.
    assert list(_paged(reader, (-1, 0), 2)) == everything


def _paged(store, after, size):
    while page := store.changes(after, limit=size):
        yield from page
        after = page[-1].cursor


def test_following_from_now_yields_only_later_changes(store, open_named):
    _, records = history()
    apply_batch(store, records[:6])
    reader = open_named("store", read_only=True)
    after = feed.start(reader, None)
    apply_batch(store, records[6:])
    later = list(feed.follow(reader, after, timeout_secs=0))
    assert later and all(c.position.offset >= 6 for c in later)
    assert later == [c for c in store.changes(limit=10_000) if c.position.offset >= 6]


def test_appends_leave_keys_to_the_first_upsert_and_small_writes_share_a_chunk(store):
    table_id = uuid.uuid4()
    log = Log()
    log.append(create_table(table_id, "labels"))
    for start in range(0, 30, 10):
        log.append(write(table_id, "append", [{"id": i, "label": f"a{i}"} for i in range(start, start + 10)]))
    apply_batch(store, log.records)
    assert [(chunk, rows) for _, chunk, rows, _, _ in store.rows("table_chunks")] == [(0, 30)]
    assert store.rows("table_keys") == [] and store.rows("table_keyed") == []  # no upsert yet: no keys

    applied = len(log.records)
    log.append(write(table_id, "upsert", [{"id": 5, "label": "x"}]))
    log.append(write(table_id, "upsert", [{"id": 5, "label": "y"}, {"id": 40, "label": "new"}]))
    log.append(write(table_id, "append", [{"id": 41, "label": "appended"}]))
    apply_batch(store, log.records[applied:])
    memory = MemoryCatalog()
    memory.apply(fold(memory, log.records))
    [table] = store.tables()
    stored = store.table_data(table)
    assert stored.equals(memory.rows[table_id])
    assert [r["id"] for r in stored.to_pylist()] == [*range(5), *range(6, 30), 5, 40, 41]
    assert stored.column("label").to_pylist()[-3:] == ["y", "new", "appended"]
    assert store.rows("table_keyed") == [(str(table_id),)]
    assert sorted(int(key) for _, key, _ in store.rows("table_keys")) == sorted([*range(30), 40, 41])


def test_a_store_of_another_format_is_refused_naming_both_formats_and_the_way_to_rebuild(
        locate, open_named):
    import sqlite3

    import psycopg

    from projector.stores.sql_schema import FORMAT_VERSION

    location = locate("old")
    open_named("old").close()
    older = FORMAT_VERSION - 1
    if location.startswith("postgresql"):
        with psycopg.connect(location) as conn:
            conn.execute("update store_format set version = %s", (older,))
    else:
        with sqlite3.connect(location) as conn:
            conn.execute(f"PRAGMA user_version = {older}")

    with pytest.raises(RuntimeError) as refused:
        open_store(location)

    message = str(refused.value)
    assert f"format {older}" in message and f"format {FORMAT_VERSION}" in message
    assert "docs/operations.md" in message and "--swap" not in message
