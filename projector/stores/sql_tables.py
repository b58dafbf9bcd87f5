"""Table rows in the SQL store: how the fold's ``TableWrite``s are laid down and read back.

A table's rows are Arrow IPC streams in ``table_chunks``, read in chunk order. ``table_keys`` says
which chunk holds each index value (as text), so an upsert rewrites only the chunks that hold the
values it replaces. Rows are added to the last chunk while it is small, so many one-row writes do
not leave one chunk each. Every function runs inside the store's commit transaction, through the
``Statements`` the store hands it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from events import TableWriteMode
from projector import table_rows
from projector.model import TableWrite

SMALL_CHUNK_ROWS = 8192
"""A last chunk with fewer rows takes the next write's rows in."""


@dataclass(frozen=True)
class Statements:
    """What these functions need of the store's open write transaction."""

    execute: Callable[[str, Sequence[Any]], Any]
    """Runs one statement (``?`` parameters) and returns its cursor."""
    key_rows: Callable[[list[str]], tuple[str, Any]]
    """A subquery of one text column ``value`` holding the keys, and its one parameter."""


def apply(store: Statements, write: TableWrite) -> None:
    table_id = str(write.table_id)
    if write.mode is TableWriteMode.OVERWRITE:
        store.execute("delete from table_chunks where table_id = ?", (table_id,))
        store.execute("delete from table_keys where table_id = ?", (table_id,))
    elif write.mode is TableWriteMode.UPSERT and write.index is not None:  # the fold refuses it else
        _remove_keys(store, table_id, write.rows, write.index)
    if write.rows.num_rows:
        _add(store, table_id, write.rows, write.index)


def remove(store: Statements, table_id: str) -> None:
    for name in ("table_chunks", "table_keys", "table_parts"):
        store.execute(f"delete from {name} where table_id = ?", (table_id,))


def _remove_keys(store: Statements, table_id: str, rows: pa.Table, index: str) -> None:
    """Drops the rows whose index values ``rows`` has, rewriting only the chunks holding them."""
    keys = table_rows.key_texts(rows, index).to_pylist()
    listed, param = store.key_rows(keys)  # one statement, one parameter, for all the keys
    chunks = {c for (c,) in store.execute(
        f"select distinct chunk from table_keys where table_id = ? and key in ({listed})", (table_id, param))}
    store.execute(f"delete from table_keys where table_id = ? and key in ({listed})", (table_id, param))
    if not chunks:
        return
    replaced = pa.array(keys, pa.string())
    for chunk in sorted(chunks):
        (blob,) = store.execute("select rows from table_chunks where table_id = ? and chunk = ?",
                                 (table_id, chunk)).fetchone()
        held = table_rows.from_ipc([blob], rows.schema)
        kept = held.filter(pc.invert(pc.is_in(table_rows.key_texts(held, index), value_set=replaced)))
        if kept.num_rows:
            store.execute("update table_chunks set num_rows = ?, rows = ? where table_id = ? and chunk = ?",
                           (kept.num_rows, table_rows.to_ipc(kept), table_id, chunk))
        else:
            store.execute("delete from table_chunks where table_id = ? and chunk = ?", (table_id, chunk))


def _add(store: Statements, table_id: str, rows: pa.Table, index: str | None) -> None:
    last = store.execute("select chunk, num_rows, rows from table_chunks where table_id = ? "
                          "order by chunk desc limit 1", (table_id,)).fetchone()
    if last is not None and last[1] < SMALL_CHUNK_ROWS:
        chunk = last[0]
        merged = pa.concat_tables([table_rows.from_ipc([last[2]], rows.schema), rows])
        store.execute("update table_chunks set num_rows = ?, rows = ? where table_id = ? and chunk = ?",
                       (merged.num_rows, table_rows.to_ipc(merged), table_id, chunk))
    else:
        chunk = 0 if last is None else last[0] + 1
        store.execute("insert into table_chunks (table_id, chunk, num_rows, rows) values (?, ?, ?, ?)",
                       (table_id, chunk, rows.num_rows, table_rows.to_ipc(rows)))
    if index is not None:
        listed, param = store.key_rows(table_rows.key_texts(rows, index).to_pylist())
        store.execute("insert into table_keys (table_id, key, chunk) "
                       f"select ?, value, ? from ({listed}) as k where true on conflict do nothing",
                       (table_id, chunk, param))
