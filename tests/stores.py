"""Reading a projection store on a read-only connection of its own: every table's rows and the
offsets. Plain SQLite, so every tier can use it."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from pathlib import Path

from projector.sqlite_store import TABLES

Offsets = dict[tuple[str, int], int]


@contextlib.contextmanager
def _read_only(store_path: str | Path) -> Iterator[sqlite3.Connection]:
    uri = f"{Path(store_path).absolute().as_uri()}?mode=ro"
    with contextlib.closing(sqlite3.connect(uri, uri=True, timeout=30)) as conn:
        yield conn


PROJECTION_TABLES = [table for table in TABLES if table != "batches"]
"""The tables that hold the projection; ``batches`` says how it was applied, which depends on
where batches ended."""


def dump(store_path: str | Path) -> dict[str, list[tuple]]:
    """Every row of every projection table, in primary-key order: two stores with equal dumps
    hold the same projection."""
    with _read_only(store_path) as conn:
        return {table: conn.execute(f"select * from {table} order by {', '.join(TABLES[table][1])}")
                .fetchall() for table in PROJECTION_TABLES}


def applied_batches(store_path: str | Path) -> list[tuple[str, int, int, int, int]]:
    """The store's committed batches: (topic, partition, first_offset, next_offset, records)."""
    with _read_only(store_path) as conn:
        return conn.execute("select * from batches order by topic, partition, first_offset").fetchall()


def assert_applied_exactly_once(store_path: str | Path, end: Offsets) -> None:
    """Every record below ``end`` was folded by exactly one committed batch: per partition, the
    batches' ranges start at 0, follow each other without gap or overlap, end at ``end``, and
    folded as many records as their ranges span (a partition's offsets have no gaps here)."""
    by_partition: dict[tuple[str, int], list[tuple[int, int, int]]] = {}
    for topic, partition, first, after, records in applied_batches(store_path):
        by_partition.setdefault((topic, partition), []).append((first, after, records))
    assert set(by_partition) == {key for key, offset in end.items() if offset}, by_partition.keys()
    for key, ranges in by_partition.items():
        expected_first = 0
        for first, after, records in ranges:
            assert first == expected_first, f"{key}: a batch folded from {first}, after {expected_first}"
            assert records == after - first, f"{key}: batch {first}..{after} folded {records} records"
            expected_first = after
        assert expected_first == end[key], f"{key}: batches end at {expected_first}, the log at {end[key]}"


def store_offsets(store_path: str | Path) -> Offsets:
    """The store's next offset per (topic, partition)."""
    with _read_only(store_path) as conn:
        return {(t, p): o for t, p, o in conn.execute("select topic, partition, next_offset from offsets")}
