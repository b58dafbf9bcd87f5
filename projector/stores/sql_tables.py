"""Table rows in the SQL store: how the fold's ``TableWrite``s are laid down and read back.

A table's rows are Arrow IPC streams in ``table_chunks``, read in chunk order; a write's stream
is kept as it was sent when it can be (``TableWrite.ipc``), so an append costs no work per row.
``table_keys`` says which chunk holds each index value (as text), so an upsert rewrites only the
chunks that hold the values it replaces. Keys are written lazily: a chunk an append adds is
``keyed = 0`` until the table's next upsert writes its keys, so tables that are only appended to
never pay for them. Rows are added to the last chunk while it is small, so many one-row writes do
not leave one chunk each; consecutive writes of one batch to one table that can be applied as one
are (``coalesce``). Every function runs inside the store's commit transaction, through the
``Statements`` the store hands it.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
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


def coalesce(writes: Sequence[TableWrite]) -> list[TableWrite]:
    """``writes`` (in log order) with runs of small appends, or of small upserts, to one table as
    one write of at most ``SMALL_CHUNK_ROWS`` rows: the same rows in the same places, written
    once. Two upserts are one whose last row per index value wins, since either way a replaced
    row moves to the end."""
    merged: list[TableWrite] = []
    last: dict[uuid.UUID, int] = {}  # table id: its last write's place in ``merged``
    for write in writes:
        at = last.get(write.table_id, -1)
        previous = merged[at] if at >= 0 else None
        if (previous is not None and write.mode is previous.mode
                and write.mode in (TableWriteMode.APPEND, TableWriteMode.UPSERT)
                and previous.rows.num_rows + write.rows.num_rows <= SMALL_CHUNK_ROWS):
            rows = pa.concat_tables([previous.rows, write.rows])
            if write.mode is TableWriteMode.UPSERT and write.index is not None:
                rows = table_rows.last_per_index(rows, write.index)
            merged[at] = replace(previous, rows=rows, ipc=b"")
            continue
        last[write.table_id] = len(merged)
        merged.append(write)
    return merged


def apply(store: Statements, write: TableWrite) -> None:
    table_id = str(write.table_id)
    if write.mode is TableWriteMode.OVERWRITE:
        store.execute("delete from table_chunks where table_id = ?", (table_id,))
        store.execute("delete from table_keys where table_id = ?", (table_id,))
    elif write.mode is TableWriteMode.UPSERT and write.index is not None:  # the fold refuses it else
        _key_chunks(store, table_id, write.rows.schema, write.index)
        _remove_keys(store, table_id, write.rows, write.index)
    if write.rows.num_rows:
        _add(store, table_id, write)


def remove(store: Statements, table_id: str) -> None:
    for name in ("table_chunks", "table_keys", "table_parts"):
        store.execute(f"delete from {name} where table_id = ?", (table_id,))


def _insert_keys(store: Statements, table_id: str, chunk: int, rows: pa.Table, index: str) -> None:
    listed, param = store.key_rows(table_rows.key_texts(rows, index).to_pylist())
    store.execute("insert into table_keys (table_id, key, chunk) "
                  f"select ?, value, ? from ({listed}) as k where true on conflict do nothing",
                  (table_id, chunk, param))


def _key_chunks(store: Statements, table_id: str, schema: pa.Schema, index: str) -> None:
    """Writes the keys of the table's chunks that have none yet."""
    unkeyed = store.execute("select chunk, rows from table_chunks where table_id = ? and keyed = 0",
                            (table_id,)).fetchall()
    for chunk, blob in unkeyed:
        _insert_keys(store, table_id, chunk, table_rows.from_ipc([blob], schema), index)
    if unkeyed:
        store.execute("update table_chunks set keyed = 1 where table_id = ? and keyed = 0", (table_id,))


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


def _add(store: Statements, table_id: str, write: TableWrite) -> None:
    """Adds the write's rows: into the last chunk while it is small (keying them if it is
    keyed), else as a new chunk, unkeyed."""
    rows = write.rows
    last = store.execute("select chunk, num_rows, rows, keyed from table_chunks where table_id = ? "
                         "order by chunk desc limit 1", (table_id,)).fetchone()
    if last is not None and last[1] < SMALL_CHUNK_ROWS:
        chunk, _, blob, keyed = last
        merged = pa.concat_tables([table_rows.from_ipc([blob], rows.schema), rows])
        store.execute("update table_chunks set num_rows = ?, rows = ? where table_id = ? and chunk = ?",
                      (merged.num_rows, table_rows.to_ipc(merged), table_id, chunk))
        if keyed and write.index is not None:
            _insert_keys(store, table_id, chunk, rows, write.index)
    else:
        chunk = 0 if last is None else last[0] + 1
        store.execute("insert into table_chunks (table_id, chunk, num_rows, rows, keyed) "
                      "values (?, ?, ?, ?, 0)",
                      (table_id, chunk, rows.num_rows, write.ipc or table_rows.to_ipc(rows)))
