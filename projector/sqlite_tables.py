"""Table rows in the SQLite store: how the fold's ``TableWrite``s are laid down and read back.

A table's rows are Arrow IPC streams in ``table_chunks``, read in chunk order. ``table_keys`` says
which chunk holds each index value (as text), so an upsert rewrites only the chunks that hold the
values it replaces. Rows are added to the last chunk while it is small, so many one-row writes do
not leave one chunk each. Every function runs inside the store's commit transaction.
"""

from __future__ import annotations

import json
import sqlite3

import pyarrow as pa
import pyarrow.compute as pc

from events import TableWriteMode
from projector import table_rows
from projector.model import TableWrite

SMALL_CHUNK_ROWS = 8192
"""A last chunk with fewer rows takes the next write's rows in."""
_KEYS = "select value from json_each(?)"
"""The keys of a JSON array of strings, as rows: one parameter for any number of keys, about
three times faster than ``executemany`` for the 10,000 keys of a large write."""


def apply(conn: sqlite3.Connection, write: TableWrite) -> None:
    table_id = str(write.table_id)
    if write.mode is TableWriteMode.OVERWRITE:
        conn.execute("delete from table_chunks where table_id = ?", (table_id,))
        conn.execute("delete from table_keys where table_id = ?", (table_id,))
    elif write.mode is TableWriteMode.UPSERT:
        _remove_keys(conn, table_id, write.rows, write.index)
    if write.rows.num_rows:
        _add(conn, table_id, write.rows, write.index)


def remove(conn: sqlite3.Connection, table_id: str) -> None:
    for name in ("table_chunks", "table_keys", "table_parts"):
        conn.execute(f"delete from {name} where table_id = ?", (table_id,))


def _remove_keys(conn: sqlite3.Connection, table_id: str, rows: pa.Table, index: str) -> None:
    """Drops the rows whose index values ``rows`` has, rewriting only the chunks holding them."""
    keys = table_rows.key_texts(rows, index).to_pylist()
    listed = json.dumps(keys)  # one statement for all the keys, expanded by SQLite's json_each
    chunks = {c for (c,) in conn.execute(
        f"select distinct chunk from table_keys where table_id = ? and key in ({_KEYS})", (table_id, listed))}
    conn.execute(f"delete from table_keys where table_id = ? and key in ({_KEYS})", (table_id, listed))
    if not chunks:
        return
    replaced = pa.array(keys, pa.string())
    for chunk in sorted(chunks):
        (blob,) = conn.execute("select rows from table_chunks where table_id = ? and chunk = ?",
                               (table_id, chunk)).fetchone()
        held = table_rows.from_ipc([blob], rows.schema)
        kept = held.filter(pc.invert(pc.is_in(table_rows.key_texts(held, index), value_set=replaced)))
        if kept.num_rows:
            conn.execute("update table_chunks set num_rows = ?, rows = ? where table_id = ? and chunk = ?",
                         (kept.num_rows, table_rows.to_ipc(kept), table_id, chunk))
        else:
            conn.execute("delete from table_chunks where table_id = ? and chunk = ?", (table_id, chunk))


def _add(conn: sqlite3.Connection, table_id: str, rows: pa.Table, index: str | None) -> None:
    last = conn.execute("select chunk, num_rows, rows from table_chunks where table_id = ? "
                        "order by chunk desc limit 1", (table_id,)).fetchone()
    if last is not None and last[1] < SMALL_CHUNK_ROWS:
        chunk = last[0]
        merged = pa.concat_tables([table_rows.from_ipc([last[2]], rows.schema), rows])
        conn.execute("update table_chunks set num_rows = ?, rows = ? where table_id = ? and chunk = ?",
                     (merged.num_rows, table_rows.to_ipc(merged), table_id, chunk))
    else:
        chunk = 0 if last is None else last[0] + 1
        conn.execute("insert into table_chunks (table_id, chunk, num_rows, rows) values (?, ?, ?, ?)",
                     (table_id, chunk, rows.num_rows, table_rows.to_ipc(rows)))
    if index is not None:
        keys = json.dumps(table_rows.key_texts(rows, index).to_pylist())
        conn.execute("insert or ignore into table_keys (table_id, key, chunk) "
                     f"select ?, value, ? from ({_KEYS})", (table_id, chunk, keys))
