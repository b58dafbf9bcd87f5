"""Table rows in the SQL store: how the fold's ``TableWrite``s are laid down and read back.

A table's rows are Arrow IPC streams in ``table_chunks``, read in chunk order. ``table_keys`` says
which chunk holds each index value (as text), so an upsert rewrites only the chunks that hold the
values it replaces. Rows are added to the last chunk while it is small, so many one-row writes do
not leave one chunk each. Every function runs inside the store's commit transaction.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from events import TableWriteMode
from projector import table_rows
from projector.model import TableWrite

if TYPE_CHECKING:
    from projector.sql_store import SqlStore

SMALL_CHUNK_ROWS = 8192
"""A last chunk with fewer rows takes the next write's rows in."""


def apply(store: SqlStore, write: TableWrite) -> None:
    table_id = str(write.table_id)
    if write.mode is TableWriteMode.OVERWRITE:
        store._execute("delete from table_chunks where table_id = ?", (table_id,))
        store._execute("delete from table_keys where table_id = ?", (table_id,))
    elif write.mode is TableWriteMode.UPSERT:
        _remove_keys(store, table_id, write.rows, write.index)
    if write.rows.num_rows:
        _add(store, table_id, write.rows, write.index)


def remove(store: SqlStore, table_id: str) -> None:
    for name in ("table_chunks", "table_keys", "table_parts"):
        store._execute(f"delete from {name} where table_id = ?", (table_id,))


def _remove_keys(store: SqlStore, table_id: str, rows: pa.Table, index: str) -> None:
    """Drops the rows whose index values ``rows`` has, rewriting only the chunks holding them."""
    keys = table_rows.key_texts(rows, index).to_pylist()
    listed, param = store._key_rows(keys)  # one statement, one parameter, for all the keys
    chunks = {c for (c,) in store._execute(
        f"select distinct chunk from table_keys where table_id = ? and key in ({listed})", (table_id, param))}
    store._execute(f"delete from table_keys where table_id = ? and key in ({listed})", (table_id, param))
    if not chunks:
        return
    replaced = pa.array(keys, pa.string())
    for chunk in sorted(chunks):
        (blob,) = store._execute("select rows from table_chunks where table_id = ? and chunk = ?",
                                 (table_id, chunk)).fetchone()
        held = table_rows.from_ipc([blob], rows.schema)
        kept = held.filter(pc.invert(pc.is_in(table_rows.key_texts(held, index), value_set=replaced)))
        if kept.num_rows:
            store._execute("update table_chunks set num_rows = ?, rows = ? where table_id = ? and chunk = ?",
                           (kept.num_rows, table_rows.to_ipc(kept), table_id, chunk))
        else:
            store._execute("delete from table_chunks where table_id = ? and chunk = ?", (table_id, chunk))


def _add(store: SqlStore, table_id: str, rows: pa.Table, index: str | None) -> None:
    last = store._execute("select chunk, num_rows, rows from table_chunks where table_id = ? "
                          "order by chunk desc limit 1", (table_id,)).fetchone()
    if last is not None and last[1] < SMALL_CHUNK_ROWS:
        chunk = last[0]
        merged = pa.concat_tables([table_rows.from_ipc([last[2]], rows.schema), rows])
        store._execute("update table_chunks set num_rows = ?, rows = ? where table_id = ? and chunk = ?",
                       (merged.num_rows, table_rows.to_ipc(merged), table_id, chunk))
    else:
        chunk = 0 if last is None else last[0] + 1
        store._execute("insert into table_chunks (table_id, chunk, num_rows, rows) values (?, ?, ?, ?)",
                       (table_id, chunk, rows.num_rows, table_rows.to_ipc(rows)))
    if index is not None:
        listed, param = store._key_rows(table_rows.key_texts(rows, index).to_pylist())
        store._execute("insert into table_keys (table_id, key, chunk) "
                       f"select ?, value, ? from ({listed}) as k where true on conflict do nothing",
                       (table_id, chunk, param))
