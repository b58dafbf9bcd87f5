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


def dump(store_path: str | Path) -> dict[str, list[tuple]]:
    """Every row of every store table, in primary-key order: two stores with equal dumps hold the
    same projection."""
    with _read_only(store_path) as conn:
        return {table: conn.execute(f"select * from {table} order by {', '.join(primary_key)}").fetchall()
                for table, (_, primary_key) in TABLES.items()}


def store_offsets(store_path: str | Path) -> Offsets:
    """The store's next offset per (topic, partition)."""
    with _read_only(store_path) as conn:
        return {(t, p): o for t, p, o in conn.execute("select topic, partition, next_offset from offsets")}
