"""DESIGN invariant 7, as a property: the catalog the store answers "as of" an offset ``k`` is the
catalog a store rebuilt from the log prefix ``[0, k)`` answers now, for random histories applied
in random batches (with replayed overlaps, as after a crash)."""

from __future__ import annotations

import json
from pathlib import Path
from unittest import mock

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from events import OnDuplicate
from profiles import examples
from projector import DatasetKind, apply_batch, companion_id, layer_table, schemas, views
from projector.stores import snapshots
from projector.stores.sql_schema import FORMAT_VERSION
from projector.stores.sqlite import SqliteStore
from stores import catalog_reads, dump

from .conftest import at, create, define, register, unregister
from .test_batch_boundaries import DATASET_IDS, TABLE_IDS, TOPIC, build_log, histories_and_batches

HIDDEN = (DatasetKind.BLUEPRINT, DatasetKind.ASSET)
ENTRY_IDS = [*DATASET_IDS, *TABLE_IDS[:2], *(companion_id(d, kind) for d in DATASET_IDS for kind in HIDDEN)]


def check_points(directory, records, batches, points: list[int]) -> None:
    store = SqliteStore(directory / "all.db")
    try:
        for replay_from, _, end in batches:
            apply_batch(store, records[replay_from:end])
        for k in points:
            prefix = SqliteStore(directory / f"prefix-{k}.db")
            try:
                apply_batch(prefix, records[:k])
                expected = catalog_reads(prefix, ENTRY_IDS)
                assert catalog_reads(store.at(k), ENTRY_IDS) == expected, f"as of offset {k}"
            finally:
                prefix.close()
        assert catalog_reads(store.at(len(records)), ENTRY_IDS) == catalog_reads(store, ENTRY_IDS)
    finally:
        store.close()


@settings(max_examples=examples(40), deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                 HealthCheck.function_scoped_fixture])
@given(case=histories_and_batches(), data=st.data())
def test_the_catalog_as_of_any_offset_is_the_log_prefix_rebuilt(tmp_path_factory, case, data):
    records, batches = case
    points = data.draw(st.lists(st.integers(0, len(records)), min_size=1, max_size=3, unique=True))
    with mock.patch.object(layer_table, "CHUNK_SEGMENTS", 2):
        check_points(tmp_path_factory.mktemp("history"), records, batches, points)


def test_a_replaced_and_a_removed_layer_are_seen_where_they_were(tmp_path):
    d = DATASET_IDS[0]
    records = build_log([create(d, "alpha", when=at(0)),
                         register(d, "s1", "base", url="file:///v1.rrd", when=at(1)),
                         register(d, "s1", "base", on_duplicate=OnDuplicate.REPLACE, url="file:///v2.rrd",
                                  when=at(2)),
                         unregister(d, ["s1"], [], when=at(3))])
    store = SqliteStore(tmp_path / "store.db")
    apply_batch(store, records)
    urls = [[x.storage_url for x in store.at(k).layers(d)] for k in range(5)]
    assert urls == [[], [], ["file:///v1.rrd"], ["file:///v2.rrd"], []]
    assert store.at(0).dataset(d) is None and store.at(1).dataset(d).name == "alpha"
    store.close()


def test_registrations_add_no_dataset_or_segment_version_their_layers_give(tmp_path):
    d = DATASET_IDS[0]
    records = build_log([create(d, "alpha", when=at(0)),
                         register(d, "s1", "base", when=at(1)), register(d, "s1", "extra", when=at(3)),
                         register(d, "s2", "base", when=at(2)),
                         register(d, "s1", "base", on_duplicate=OnDuplicate.REPLACE, when=at(4)),
                         unregister(d, [], ["extra"], when=at(5))])
    store = SqliteStore(tmp_path / "store.db")
    apply_batch(store, records)
    kept = dump(tmp_path / "store.db")
    # The dataset: created, then unregistered from; the segments: created, and s1 touched by the
    # unregister.
    assert [row[-2] for row in kept["dataset_history"] if row[0] == str(d)] == [0, 5]
    assert [(row[1], row[-2]) for row in kept["segment_history"]] == [("s1", 1), ("s1", 5), ("s2", 3)]
    as_of = [store.at(k).dataset(d) for k in range(2, 7)]
    assert [x.updated_at for x in as_of] == [at(1), at(3), at(3), at(4), at(5)]
    assert [x.segments_created for x in as_of] == [1, 1, 2, 2, 2]
    assert [x.schemaless_layers for x in as_of] == [1, 2, 3, 3, 2]
    assert [[s.updated_at for s in store.at(k).segments(d)] for k in (3, 5, 6)] == [
        [at(3)], [at(4), at(2)], [at(5), at(2)]]
    store.close()


def test_a_diff_lists_segments_layers_and_properties_that_changed(tmp_path):
    d = DATASET_IDS[0]
    schema, _ = schemas.properties_parts(pa.table({"property:episode:success": [True]}))

    def registered(segment_id, url, success, **kwargs):
        batch = schemas.properties_parts(pa.table({"property:episode:success": [success]}))[1]
        return register(d, segment_id, "base", url=url, when=at(1), properties_batch=batch,
                        properties_schema_sha256=schemas.digest(schema), **kwargs)

    records = build_log([create(d, "alpha", when=at(0)), define(d, schema, when=at(0)),
                         registered("s1", "file:///s1.rrd", True), registered("s2", "file:///s2.rrd", True),
                         register(d, "s2", "extra", url="file:///s2-extra.rrd", when=at(1)),
                         registered("s1", "file:///s1-v2.rrd", False, on_duplicate=OnDuplicate.REPLACE),
                         unregister(d, ["s2"], [], when=at(2)), registered("s3", "file:///s3.rrd", True)])
    store = SqliteStore(tmp_path / "store.db")
    apply_batch(store, records)
    changes = views.diff_table(store.at(5), store, d).to_pylist()
    columns = ["rerun_segment_id", "rerun_layer_name", "change", "old_storage_url", "new_storage_url",
               "property", "old_value", "new_value"]
    assert [tuple(c[n] for n in columns) for c in changes] == [
        ("s1", "base", "layer_replaced", "file:///s1.rrd", "file:///s1-v2.rrd", None, None, None),
        ("s1", None, "property_changed", None, None, "property:episode:success", "True", "False"),
        ("s3", None, "segment_added", None, None, None, None, None),
        ("s3", "base", "layer_added", None, "file:///s3.rrd", None, None, None),
        ("s2", None, "segment_removed", None, None, None, None, None),
        ("s2", "base", "layer_removed", "file:///s2.rrd", None, None, None, None),
        ("s2", "extra", "layer_removed", "file:///s2-extra.rrd", None, None, None, None)]
    when = at(1).replace(tzinfo=None)
    assert changes[0]["old_registration_time"] == changes[0]["new_registration_time"] == when
    assert views.diff_table(store, store, d).num_rows == 0
    store.close()


@settings(max_examples=examples(25), deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                 HealthCheck.function_scoped_fixture])
@given(case=histories_and_batches(), data=st.data())
def test_a_rebuild_from_any_snapshot_equals_a_rebuild_from_offset_0(tmp_path_factory, case, data):
    records, batches = case
    k = data.draw(st.integers(0, len(records)))
    directory = tmp_path_factory.mktemp("snapshots")
    with mock.patch.object(layer_table, "CHUNK_SEGMENTS", 2):
        whole = SqliteStore(directory / "whole.db")
        apply_batch(whole, records)
        whole.close()
        prefix = SqliteStore(directory / "prefix.db")
        apply_batch(prefix, records[:k])
        snapshots.write(prefix, directory / "kept")
        prefix.close()
        rebuilt = SqliteStore(directory / "rebuilt.db")
        snapshot = snapshots.newest(directory / "kept")
        assert snapshot is not None and snapshot.next_offsets().get((TOPIC, 0), 0) == k
        snapshots.restore(rebuilt, snapshot)
        for replay_from, _, end in batches:  # from offset 0: the records of the snapshot are skipped
            apply_batch(rebuilt, records[replay_from:end])
        rebuilt.close()
    assert dump(directory / "rebuilt.db") == dump(directory / "whole.db")


def test_the_newest_snapshot_of_this_format_is_used_and_the_others_said(tmp_path):
    d = DATASET_IDS[0]
    store = SqliteStore(tmp_path / "store.db")
    apply_batch(store, build_log([create(d, "alpha", when=at(0))]))
    first = snapshots.write(store, tmp_path / "kept")
    apply_batch(store, build_log([create(d, "alpha", when=at(0)), register(d, "s1", when=at(1))]))
    second = snapshots.write(store, tmp_path / "kept")
    assert snapshots.write(store, tmp_path / "kept") == second  # the same offset: kept as it is
    store.close()
    manifest = json.loads((Path(second.path) / snapshots.MANIFEST).read_text())
    (Path(second.path) / snapshots.MANIFEST).write_text(json.dumps({**manifest, "format_version": 1}))
    said: list[str] = []
    found = snapshots.newest(tmp_path / "kept", said.append)
    assert found is not None and found.url == first.url
    assert said == [f"skipping {second.url}: store format 1, this strata writes {FORMAT_VERSION}"]
    assert snapshots.newest(tmp_path / "none") is None
    restored = SqliteStore(tmp_path / "restored.db")
    snapshots.restore(restored, found)
    with pytest.raises(ValueError, match="has folded records already"):
        snapshots.restore(restored, found)
    assert restored.dataset(d).name == "alpha" and restored.next_offsets() == {(TOPIC, 0): 1}
    restored.close()
