"""Table rows in the SQL store: how the fold's ``TableWrite``s are laid down and read back.

A table's rows are Arrow IPC streams in ``table_chunks``, read in chunk order; a write's stream
is kept as it was sent when it fills a chunk of its own (``TableWrite.ipc``), so a large append
costs no work per row. Rows are added to the last chunk while it is small, so many one-row
writes do not leave one chunk each: within one commit, a table's last chunk is kept in memory
while writes add to it, and written once. ``table_keys`` says which chunk holds each index value
(as text), so an upsert rewrites only the chunks that hold the values it replaces; a table's keys
are written from its first upsert on (``table_keyed`` lists those tables), so tables that are only
appended to never pay for them. Writes are applied one by one in log order, so where a batch ends
never changes what is stored. Everything runs inside the store's commit transaction, through the
``Statements`` the store hands it.

The past is kept too: beside each chunk, its rows' origins (``ORIGINS``: the offset of the write
that added each row and its position in that write), and in ``table_row_history`` the rows a write
replaced or removed, with their origins, by the offset of that write (``valid_to``): an overwrite
or a deleted table moves its chunks there as they are, an upsert the rows it replaces. The rows
as of ``k`` (``rows_at``) are those of both added before ``k`` and not replaced before it, in the
order of their origins: the order a table rebuilt from the log prefix ``[0, k)`` has. Clients read
a table's rows through ``current_rows`` and ``rows_as_of``, on the store's ``Queries``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from events import TableWriteMode
from projector import table_rows
from projector.model import Table, TableWrite
from projector.stores.sql_database import Queries

SMALL_CHUNK_ROWS = 8192
"""A last chunk with fewer rows takes the next write's rows in."""

_HISTORY = "table_id, valid_to, chunk, num_rows, rows, origins"

ORIGINS = pa.schema([("offset", pa.int64()), ("position", pa.int64())])
"""Where each row of a chunk comes from: the log offset of its write, its position in it."""


def _origins(offset: int, rows: int) -> pa.Table:
    return pa.table([pa.array(np.full(rows, offset, np.int64)), pa.array(np.arange(rows, dtype=np.int64))],
                    schema=ORIGINS)


@dataclass(frozen=True)
class Statements:
    """What these functions need of the store's open write transaction."""

    execute: Callable[[str, Sequence[Any]], Any]
    """Runs one statement (``?`` parameters) and returns its cursor."""
    key_rows: Callable[[list[str]], tuple[str, Any]]
    """A subquery of one text column ``value`` holding the keys, and its one parameter."""
    key_in: Callable[[list[str]], tuple[str, Any]]
    """A condition that column ``key`` is one of the keys, and its one parameter."""


@dataclass
class _LastChunk:
    """A table's last chunk while a commit adds to it."""

    chunk: int
    parts: list[pa.Table]
    origins: list[pa.Table]
    num_rows: int
    stored: bool
    """Whether the chunk is in the store (to update) or new (to insert)."""
    ipc: bytes = b""
    """The chunk as stored, or as its one write sent it; empty once rows were added."""
    changed: bool = False


@dataclass
class Writer:
    """The table writes of one commit, applied in log order (``apply``), then ``finish``."""

    store: Statements
    _last: dict[str, _LastChunk | None] = field(default_factory=dict)
    _keyed: dict[str, bool] = field(default_factory=dict)

    def apply(self, write: TableWrite) -> None:
        table_id = str(write.table_id)
        if write.mode is TableWriteMode.OVERWRITE:
            self._close_all(table_id, write.offset)
        elif write.mode is TableWriteMode.UPSERT and write.index is not None:  # the fold refuses it else
            self._write_last(table_id)
            self._last.pop(table_id, None)  # the rewrite below may change it: read it again
            if not self._is_keyed(table_id):
                self._key_chunks(table_id, write.rows.schema, write.index)
            _remove_keys(self.store, table_id, write, write.index)
        if write.rows.num_rows:
            self._add(table_id, write)

    def _close_all(self, table_id: str, offset: int) -> None:
        """Every row of the table ends at ``offset``: its chunks move to the history as they are."""
        self._write_last(table_id)
        self._last[table_id] = None
        self.store.execute(f"insert into table_row_history ({_HISTORY}) select table_id, ?, chunk, "
                           "num_rows, rows, origins from table_chunks where table_id = ?", (offset, table_id))
        self.store.execute("delete from table_chunks where table_id = ?", (table_id,))
        self.store.execute("delete from table_keys where table_id = ?", (table_id,))

    def finish(self) -> None:
        """Write the last chunks the commit changed."""
        for table_id in list(self._last):
            self._write_last(table_id)
        self._last.clear()

    def remove(self, table_id: str, offset: int) -> None:
        """A table deleted at ``offset``: its rows move to the history, its keys and parts go."""
        self._close_all(table_id, offset)
        self._keyed[table_id] = False
        for name in ("table_parts", "table_keyed"):
            self.store.execute(f"delete from {name} where table_id = ?", (table_id,))

    def _is_keyed(self, table_id: str) -> bool:
        if table_id not in self._keyed:
            self._keyed[table_id] = self.store.execute(
                "select 1 from table_keyed where table_id = ?", (table_id,)).fetchone() is not None
        return self._keyed[table_id]

    def _key_chunks(self, table_id: str, schema: pa.Schema, index: str) -> None:
        """A table's first upsert: write the keys of every chunk, and of every later write."""
        for chunk, blob in self.store.execute("select chunk, rows from table_chunks where table_id = ?",
                                              (table_id,)).fetchall():
            _insert_keys(self.store, table_id, chunk, table_rows.from_ipc([blob], schema), index)
        self.store.execute("insert into table_keyed (table_id) values (?)", (table_id,))
        self._keyed[table_id] = True

    def _load_last(self, table_id: str, schema: pa.Schema) -> _LastChunk | None:
        if table_id not in self._last:
            row = self.store.execute("select chunk, num_rows, rows, origins from table_chunks "
                                     "where table_id = ? order by chunk desc limit 1", (table_id,)).fetchone()
            self._last[table_id] = None if row is None else _LastChunk(
                row[0], [table_rows.from_ipc([row[2]], schema)], [table_rows.from_ipc([row[3]], ORIGINS)],
                row[1], stored=True, ipc=row[2])
        return self._last[table_id]

    def _add(self, table_id: str, write: TableWrite) -> None:
        rows = write.rows
        origins = _origins(write.offset, rows.num_rows)
        last = self._load_last(table_id, rows.schema)
        if last is not None and last.num_rows < SMALL_CHUNK_ROWS:
            last.parts.append(rows)
            last.origins.append(origins)
            last.num_rows += rows.num_rows
            last.ipc = b""
            last.changed = True
        else:
            self._write_last(table_id)
            last = _LastChunk(0 if last is None else last.chunk + 1, [rows], [origins], rows.num_rows,
                              stored=False, ipc=write.ipc, changed=True)
            self._last[table_id] = last
        if write.index is not None and self._is_keyed(table_id):
            _insert_keys(self.store, table_id, last.chunk, rows, write.index)

    def _write_last(self, table_id: str) -> None:
        last = self._last.get(table_id)
        if last is None or not last.changed:
            return
        blob = last.ipc or table_rows.to_ipc(pa.concat_tables(last.parts))
        origins = table_rows.to_ipc(pa.concat_tables(last.origins))
        if last.stored:
            self.store.execute("update table_chunks set num_rows = ?, rows = ?, origins = ? "
                               "where table_id = ? and chunk = ?", (last.num_rows, blob, origins, table_id,
                                                                    last.chunk))
        else:
            self.store.execute("insert into table_chunks (table_id, chunk, num_rows, rows, origins) "
                               "values (?, ?, ?, ?, ?)", (table_id, last.chunk, last.num_rows, blob, origins))
        last.stored, last.ipc, last.changed = True, blob, False


def _insert_keys(store: Statements, table_id: str, chunk: int, rows: pa.Table, index: str) -> None:
    listed, param = store.key_rows(table_rows.key_texts(rows, index).to_pylist())
    store.execute("insert into table_keys (table_id, key, chunk) "
                  f"select ?, value, ? from ({listed}) as k where true on conflict do nothing",
                  (table_id, chunk, param))


def _remove_keys(store: Statements, table_id: str, write: TableWrite, index: str) -> None:
    """Drops the rows whose ``index`` values ``write`` has, rewriting only the chunks holding
    them; the rows dropped go to the history, ending at the write's offset."""
    keys = table_rows.key_texts(write.rows, index).to_pylist()
    among, param = store.key_in(keys)  # one statement, one parameter, for all the keys
    chunks = {c for (c,) in store.execute(
        f"select distinct chunk from table_keys where table_id = ? and {among}", (table_id, param))}
    store.execute(f"delete from table_keys where table_id = ? and {among}", (table_id, param))
    if not chunks:
        return
    replaced = pa.array(keys, pa.string())
    for chunk in sorted(chunks):
        blob, origins_blob = store.execute("select rows, origins from table_chunks where table_id = ? "
                                           "and chunk = ?", (table_id, chunk)).fetchone()
        held = table_rows.from_ipc([blob], write.rows.schema)
        origins = table_rows.from_ipc([origins_blob], ORIGINS)
        gone = pc.is_in(table_rows.key_texts(held, index), value_set=replaced)
        closed = held.filter(gone)
        store.execute(f"insert into table_row_history ({_HISTORY}) values (?, ?, ?, ?, ?, ?)",
                      (table_id, write.offset, chunk, closed.num_rows, table_rows.to_ipc(closed),
                       table_rows.to_ipc(origins.filter(gone))))
        kept, kept_origins = held.filter(pc.invert(gone)), origins.filter(pc.invert(gone))
        if kept.num_rows:
            store.execute("update table_chunks set num_rows = ?, rows = ?, origins = ? where table_id = ? "
                          "and chunk = ?", (kept.num_rows, table_rows.to_ipc(kept),
                                            table_rows.to_ipc(kept_origins), table_id, chunk))
        else:
            store.execute("delete from table_chunks where table_id = ? and chunk = ?", (table_id, chunk))


def rows_at(current: Sequence[tuple[bytes, bytes]], closed: Sequence[tuple[bytes, bytes]], offset: int,
            schema: pa.Schema) -> pa.Table:
    """A table's rows as of ``offset`` from its ``current`` chunks and the ``closed`` ones of the
    history that ended at or after it, each as (rows, origins) blobs: those added before
    ``offset``, in the order of their origins."""
    chunks = [*current, *closed]
    rows = table_rows.from_ipc([r for r, _ in chunks], schema)
    origins = table_rows.from_ipc([o for _, o in chunks], ORIGINS)
    before = pc.less(origins["offset"], offset)
    rows, origins = rows.filter(before), origins.filter(before)
    return rows.take(pc.sort_indices(origins, [("offset", "ascending"), ("position", "ascending")]))


def current_rows(queries: Queries, table: Table) -> pa.Table:
    """The rows of a created table, in its schema (field metadata included)."""
    schema = table_rows.table_schema(table.arrow_schema)
    blobs = queries.read_blobs("select rows from table_chunks where table_id = ? order by chunk",
                               (str(table.id),))
    return table_rows.from_ipc(blobs, schema)


def rows_as_of(queries: Queries, table: Table, offset: int) -> pa.Table:
    """The rows of a created table as of ``offset`` (``rows_at``), its current chunks and its
    history read as of one commit."""
    table_id = str(table.id)
    current, closed = queries.read_together([
        ("select rows, origins from table_chunks where table_id = ? order by chunk", (table_id,)),
        ("select rows, origins from table_row_history where table_id = ? and valid_to >= ? "
         "order by valid_to, chunk", (table_id, offset))])
    return rows_at([(bytes(r), bytes(o)) for r, o in current], [(bytes(r), bytes(o)) for r, o in closed],
                   offset, table_rows.table_schema(table.arrow_schema))
