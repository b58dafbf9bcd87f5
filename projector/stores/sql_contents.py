"""A SQL store's whole contents: every row of every table (``projector.stores.sql_schema.TABLES``)
read out as of one commit (what a snapshot is written from), copied in from another store or a
snapshot in one transaction (``replace_contents``: a swap after a rebuild, a restore), and counted
for summaries.
"""

from __future__ import annotations

from typing import Any, Protocol

import pyarrow as pa

from projector.model import DatasetKind
from projector.stores.sql_database import Database
from projector.stores.sql_schema import TABLES, names


class Contents(Protocol):
    """What a store's contents are copied from: another store, or a snapshot."""

    def next_offsets(self) -> dict[tuple[str, int], int]: ...

    def contents_of(self, table: str) -> pa.Table:
        """Every row of ``table`` (one of ``TABLES``) as Arrow, in ``arrow_schema``."""
        ...


def _select_all(table: str) -> str:
    columns, key = TABLES[table]
    return f"select {names(columns)} from {table} order by {names(key)}"


def replace_contents(database: Database, source: Contents) -> bool:
    """Make the store on ``database`` a copy of ``source`` (a store of either backend, that
    nothing writes meanwhile) in one transaction, if ``source`` has applied at least every record
    this store has; else change nothing and return False.

    Readers see the old contents or the new, never a mix. The copy is the only work done while
    this store is locked for writing: a projector writing to it waits for no more than that,
    and its next batch skips the records the new contents already hold.
    """
    return database.replace_tables(source.next_offsets(), list(TABLES), source.contents_of)


def snapshot_tables(database: Database) -> dict[str, pa.Table]:
    """Every table as Arrow (``arrow_schema``), rows by primary key, all as of one commit."""
    read = database.read_tables([(_select_all(table), arrow_schema(table)) for table in TABLES])
    return dict(zip(TABLES, read, strict=True))


def contents_of(database: Database, table: str) -> pa.Table:
    """Every row of ``table`` as Arrow (``arrow_schema``), by primary key."""
    return database.read_tables([(_select_all(table), arrow_schema(table))])[0]


_ARROW_TYPES = {str: pa.string(), int: pa.int64(), bytes: pa.binary()}


def arrow_schema(table: str) -> pa.Schema:
    """Table ``table`` (one of ``TABLES``) in Arrow: ``str``, ``int`` and ``bytes`` columns as
    string, int64 and binary."""
    return pa.schema([(name, _ARROW_TYPES[kind]) for name, kind in TABLES[table][0].items()])


def rows(database: Database, table: str) -> list[tuple[Any, ...]]:
    """Every row of ``table`` (one of ``TABLES``), in its columns' order, by primary key."""
    with database.reading():
        return [tuple(row) for row in database.execute(_select_all(table))]


def counts(database: Database) -> dict[str, int]:
    """Rows per table (live datasets only), for summaries."""
    counts = {table: database.query(f"select count(*) as n from {table}")[0]["n"] for table in TABLES}
    counts["datasets"] = database.query("select count(*) as n from datasets where deleted = 0 and kind = ?",
                                        (DatasetKind.DATASET.value,))[0]["n"]
    return counts
