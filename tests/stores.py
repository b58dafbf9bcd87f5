"""Reading a projection store (SQLite file or PostgreSQL URL) on a read-only connection of its
own: every table's rows and the offsets."""

from __future__ import annotations

import contextlib
import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg

from projector import open_store
from projector.stores import scheme
from projector.stores.sql import SqlStore
from projector.stores.sql_schema import TABLES

Offsets = dict[tuple[str, int], int]


@contextlib.contextmanager
def _read_only(location: str | Path) -> Iterator[SqlStore]:
    store = open_store(location, read_only=True)
    try:
        yield store
    finally:
        store.close()


PROJECTION_TABLES = [table for table in TABLES if table != "batches"]
"""The tables that hold the projection; ``batches`` says how it was applied, which depends on
where batches ended."""


def dump(location: str | Path) -> dict[str, list[tuple]]:
    """Every row of every projection table, in primary-key order: two stores with equal dumps
    hold the same projection, whatever their backends. The feed's commit times (its last column)
    are left out: they say when a store committed a change, not what it holds."""
    with _read_only(location) as store:
        tables = {table: store.rows(table) for table in PROJECTION_TABLES}
    tables["feed"] = [row[:-1] for row in tables["feed"]]
    return tables


def applied_batches(location: str | Path) -> list[tuple[str, int, int, int, int]]:
    """The store's committed batches: (topic, partition, first_offset, next_offset, records)."""
    with _read_only(location) as store:
        return store.rows("batches")


def assert_applied_exactly_once(location: str | Path, end: Offsets) -> None:
    """Every record below ``end`` was folded by exactly one committed batch: per partition, the
    batches' ranges start at 0, follow each other without gap or overlap, end at ``end``, and
    folded as many records as their ranges span (a partition's offsets have no gaps here)."""
    by_partition: dict[tuple[str, int], list[tuple[int, int, int]]] = {}
    for topic, partition, first, after, records in applied_batches(location):
        by_partition.setdefault((topic, partition), []).append((first, after, records))
    assert set(by_partition) == {key for key, offset in end.items() if offset}, by_partition.keys()
    for key, ranges in by_partition.items():
        expected_first = 0
        for first, after, records in ranges:
            assert first == expected_first, f"{key}: a batch folded from {first}, after {expected_first}"
            assert records == after - first, f"{key}: batch {first}..{after} folded {records} records"
            expected_first = after
        assert expected_first == end[key], f"{key}: batches end at {expected_first}, the log at {end[key]}"


def lock_for_writing_at_once(location: str | Path) -> Offsets:
    """Take the lock a projector's commit takes, without waiting (an error if another connection
    holds it), release it, and return the offsets read under it."""
    if scheme(location) == "sqlite":
        with contextlib.closing(sqlite3.connect(location, timeout=0)) as conn:
            conn.execute("BEGIN IMMEDIATE")  # 'database is locked' if held
            offsets = conn.execute("select topic, partition, next_offset from offsets").fetchall()
            conn.rollback()
    else:
        with psycopg.connect(str(location)) as conn:  # in a transaction until the block ends
            conn.execute("lock table offsets in exclusive mode nowait")  # LockNotAvailable if held
            offsets = conn.execute("select topic, partition, next_offset from offsets").fetchall()
            conn.rollback()
    return {(t, p): o for t, p, o in offsets}


def store_offsets(location: str | Path) -> Offsets:
    """The store's next offset per (topic, partition)."""
    with _read_only(location) as store:
        return store.next_offsets()


def catalog_reads(reader, entry_ids: list[uuid.UUID]) -> dict:
    """Everything a client reads of the catalog through ``reader`` (a store, or a store ``at``
    an offset): the entries, and of each of ``entry_ids`` its dataset, segments, layers, layer
    table, asset scopes and tags, and its table and the table's rows."""
    entries = reader.datasets() + reader.tables()
    found: dict = {"datasets": reader.datasets(), "tables": reader.tables(),
                   "by_name": [(reader.dataset_by_name(e.name), reader.table_by_name(e.name))
                               for e in entries]}
    for entry_id in entry_ids:
        found[entry_id] = (reader.dataset(entry_id), reader.segments(entry_id), reader.layers(entry_id),
                           reader.layer_table(entry_id).to_pylist(), reader.asset_scopes(entry_id),
                           reader.table(entry_id), reader.tags(entry_id))
        found[entry_id] += tuple(reader.segment_layer_table(entry_id, s.segment_id).to_pylist()
                                 for s in reader.segments(entry_id))
        table = reader.table(entry_id)
        if table is not None and not table.deleted and not table.registered:
            found[entry_id] += (reader.table_data(table).to_pylist(),)
    return found
