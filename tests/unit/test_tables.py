"""The segment table and the manifest, built from projector rows."""

from __future__ import annotations

import dataclasses
import hashlib
import uuid

import numpy as np
import pyarrow as pa
import pytest

from events import CATALOG_TOPIC, IndexKind, IndexRange, OnDuplicate
from projector import Layer, LogPosition, Segment, apply_batch, schemas
from projector.stores.sqlite import SqliteStore
from projector.views import manifest_table, segment_table
from recordings import Recording

from .conftest import Log, at, create, register, table_of

DATASET = uuid.uuid4()
X, Y, GOOD = "property:q:x", "property:q:y", "property:quality:tracking_good"


def props(columns: dict[str, object]) -> bytes:
    """Properties bytes exactly as registration builds them (Recording.properties_bytes)."""
    table = pa.table({name: pa.array([value]) for name, value in columns.items()})
    return Recording("file:///x.rrd", "x", 0, pa.schema([]), table).properties_bytes()


def layer(segment_id: str, name: str, offset: int, *, size: int = 1, properties: bytes = b"",
          schema: bytes = b"") -> Layer:
    return Layer(
        dataset_id=DATASET, segment_id=segment_id, layer_name=name,
        storage_url=f"file:///data/{segment_id}/{name}.rrd", size_bytes=size,
        schema_sha256=hashlib.sha256(schema).hexdigest() if schema else "",
        properties=properties, registered_at=at(offset),
        registered_by=LogPosition(CATALOG_TOPIC, 0, offset), event_id=uuid.uuid4())


def segment(segment_id: str, offset: int) -> Segment:
    return Segment(DATASET, segment_id, LogPosition(CATALOG_TOPIC, 0, offset), at(offset), position=offset)


def naive(offset: float):
    return at(offset).replace(tzinfo=None)


@pytest.fixture
def catalog():
    """Segments A (three layers) and B (one), grouped by segment, each in registration order,
    as ``ProjectionWriter.layers`` lists them; C has no layers."""
    segments = [segment("A", 0), segment("B", 2), segment("C", 9)]
    layers = [
        layer("A", "zeta", 0, size=10, properties=props({X: 1, Y: "a", GOOD: [True]}),
              schema=b"schema-zeta"),
        layer("A", "alpha", 1, size=5, properties=props({X: 2})),
        layer("A", "late", 3, size=2**40, properties=props({GOOD: [False]})),
        layer("B", "base", 2, size=7),
    ]
    return segments, layers


def test_segment_table_columns(catalog):
    table = segment_table(table_of(catalog[1]))

    for name in ("rerun_segment_id", "rerun_layer_names", "rerun_storage_urls",
                 "rerun_last_updated_at", "rerun_size_bytes"):
        assert name in table.column_names
    assert table.column("rerun_segment_id").to_pylist() == ["A", "B"]  # C has no layers
    assert table.column("rerun_layer_names").to_pylist() == [["zeta", "alpha", "late"], ["base"]]
    assert table.column("rerun_storage_urls").to_pylist() == [
        ["file:///data/A/zeta.rrd", "file:///data/A/alpha.rrd", "file:///data/A/late.rrd"],
        ["file:///data/B/base.rrd"]]
    assert table.column("rerun_size_bytes").to_pylist() == [10 + 5 + 2**40, 7]
    assert table.schema.field("rerun_size_bytes").type == pa.uint64()
    assert table.column("rerun_last_updated_at").to_pylist() == [naive(3), naive(2)]


def test_segment_table_property_merge_latest_non_null_wins_per_column(catalog):
    table = segment_table(table_of(catalog[1]))

    assert [n for n in table.column_names if n.startswith("property:")] == sorted([X, Y, GOOD])
    assert table.column(X).to_pylist() == [2, None]  # alpha, registered after zeta
    assert table.column(Y).to_pylist() == ["a", None]  # only zeta has it
    assert table.column(GOOD).to_pylist() == [[False], None]  # late, the last registered
    assert table.schema.field(X).type == pa.int64()
    assert table.schema.field(GOOD).type == pa.list_(pa.bool_())


def test_segment_table_without_properties_has_no_property_columns():
    table = segment_table(table_of([layer("A", "base", 0), layer("A", "more", 1)]))
    assert table.column_names == ["rerun_segment_id", "rerun_layer_names", "rerun_storage_urls",
                                  "rerun_last_updated_at", "rerun_num_chunks", "rerun_size_bytes"]
    assert table.num_rows == 1


def test_segment_table_chunks_and_index_ranges_merge_the_layers():
    seconds = 10**9
    real_time = [IndexRange("real_time", IndexKind.TIMESTAMP, 5 * seconds, 9 * seconds)]
    layers = [
        dataclasses.replace(layer("A", "base", 0), num_chunks=4, index_ranges=(
            *real_time, IndexRange("frame", IndexKind.SEQUENCE, 3, 7))),
        dataclasses.replace(layer("A", "derived", 1), num_chunks=2, index_ranges=(
            IndexRange("real_time", IndexKind.TIMESTAMP, 2 * seconds, 6 * seconds),)),
        dataclasses.replace(layer("B", "base", 2), num_chunks=1, index_ranges=(
            IndexRange("elapsed", IndexKind.DURATION, 0, seconds),)),
        layer("C", "before_v4", 3),  # registered by an older event: chunks unknown, no ranges
    ]
    table = segment_table(table_of(layers))
    assert table.column("rerun_num_chunks").to_pylist() == [6, 1, None]
    assert table.schema.field("rerun_num_chunks").type == pa.uint64()
    assert table.column_names[-6:] == ["elapsed:start", "elapsed:end", "frame:start", "frame:end",
                                       "real_time:start", "real_time:end"]
    assert table.column("real_time:start").cast(pa.int64()).to_pylist() == [2 * seconds, None, None]
    assert table.column("real_time:end").cast(pa.int64()).to_pylist() == [9 * seconds, None, None]
    assert table.column("frame:start").to_pylist() == [3, None, None]
    assert table.column("elapsed:end").cast(pa.int64()).to_pylist() == [None, seconds, None]
    assert table.schema.field("real_time:start").type == pa.timestamp("ns")
    assert table.schema.field("elapsed:end").type == pa.duration("ns")
    assert table.schema.field("frame:end").metadata == {
        b"rerun:kind": b"index", b"rerun:index": b"frame", b"rerun:index_kind": b"sequence",
        b"rerun:index_marker": b"end"}


def test_empty_dataset_tables():
    assert segment_table(table_of([])).num_rows == 0
    assert manifest_table(table_of([])).num_rows == 0
    assert "rerun_segment_id" in manifest_table(table_of([])).column_names


def test_manifest_has_one_row_per_layer_with_its_own_properties(catalog):
    _, layers = catalog
    table = manifest_table(table_of(layers))

    rows = list(zip(table.column("rerun_segment_id").to_pylist(),
                    table.column("rerun_layer_name").to_pylist(), strict=True))
    assert rows == [("A", "alpha"), ("A", "late"), ("A", "zeta"), ("B", "base")]
    assert table.column("rerun_storage_url").to_pylist() == [
        f"file:///data/{s}/{n}.rrd" for s, n in rows]
    assert table.column("rerun_size_bytes").to_pylist() == [5, 2**40, 10, 7]
    assert table.column("rerun_registration_time").to_pylist() == [
        naive(1), naive(3), naive(0), naive(2)]
    assert table.column(X).to_pylist() == [2, None, 1, None]
    assert table.column(Y).to_pylist() == [None, None, "a", None]
    assert table.column(GOOD).to_pylist() == [None, [False], [True], None]
    assert table.column("rerun_schema_sha256").to_pylist() == [
        None, None, hashlib.sha256(b"schema-zeta").digest(), None]


def test_replaced_layer_moves_last_and_wins_the_merge(tmp_path):
    # Through fold and the store: the order of ``store.layers`` is what the merge relies on.
    log = Log()
    records = [
        log.append(create(DATASET, "droid")),
        log.append(register(DATASET, "seg", "base", properties=props({X: 1, Y: "base"}))),
        log.append(register(DATASET, "seg", "extra", properties=props({X: 2}))),
        log.append(register(DATASET, "seg", "base", properties=props({X: 3}),
                            on_duplicate=OnDuplicate.REPLACE)),
    ]
    store = SqliteStore(tmp_path / "store.db")
    try:
        apply_batch(store, records)
        table = segment_table(store.layer_table(DATASET))
        manifest = manifest_table(store.layer_table(DATASET))
    finally:
        store.close()

    assert table.column("rerun_layer_names").to_pylist() == [["extra", "base"]]
    assert table.column(X).to_pylist() == [3]
    # The replacement has no Y; the replaced registration's value is gone with it.
    assert Y not in table.column_names and Y not in manifest.column_names
    assert manifest.column(X).to_pylist() == [3, 2]


def test_properties_inline_and_by_reference_merge_alike():
    """Layers registered before envelope v5 carry an IPC stream, later ones a compressed batch
    in a schema named by digest; equal batch bytes under two schemas are two values."""
    def by_reference(columns: dict[str, object]) -> tuple[bytes, bytes]:
        return schemas.properties_parts(pa.table({n: pa.array([v]) for n, v in columns.items()}))

    x_int, batch_int = by_reference({X: 7})
    seven_bits = float(np.array([7]).view(np.float64)[0])  # the float64 with int64 7's bytes
    x_float, batch_float = by_reference({Y: seven_bits})
    assert batch_int == batch_float and x_int != x_float
    layers = [
        layer("A", "base", 0, properties=props({X: 1, GOOD: [True]})),
        dataclasses.replace(layer("A", "quality", 1), properties_schema_sha256=schemas.digest(x_int),
                            properties_batch=batch_int),
        dataclasses.replace(layer("B", "base", 2), properties_schema_sha256=schemas.digest(x_float),
                            properties_batch=batch_float),
        dataclasses.replace(layer("C", "base", 3), properties_schema_sha256=schemas.digest(x_int),
                            properties_batch=batch_int),
    ]
    property_schemas = {schemas.digest(s): s for s in (x_int, x_float)}
    table = segment_table(table_of(layers), property_schemas)
    assert table.column(X).to_pylist() == [7, None, 7]
    assert table.column(GOOD).to_pylist() == [[True], None, None]
    assert table.column(Y).to_pylist() == [None, seven_bits, None]
    manifest = manifest_table(table_of(layers), property_schemas)
    assert manifest.column(X).to_pylist() == [1, 7, None, 7]
