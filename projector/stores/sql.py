"""The projection store's tables and queries, common to its SQL backends (SQLite, PostgreSQL).

Times are stored as integer microseconds since the Unix epoch (UTC), so they round-trip exactly;
ids as text, Arrow data as IPC bytes. Statements are written once, with ``?`` parameters and
quoted column names, in the SQL both backends speak; a backend supplies its connection, its
write transaction and how a commit wakes waiting readers.
"""

from __future__ import annotations

import contextlib
import functools
import json
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

import pyarrow as pa
import pyarrow.compute as pc

from events import (
    CATALOG_TOPIC,
    AssetMode,
    DefineSchema,
    IndexKind,
    IndexRange,
    RegisterLayer,
    TableWriteMode,
)
from projector import layer_table as _layer_table
from projector import schemas, table_rows
from projector.fold import CatalogView
from projector.model import (
    AssetScope,
    Change,
    ChangeKind,
    Changes,
    Dataset,
    DatasetKind,
    Layer,
    LogPosition,
    LogRecord,
    Outcome,
    Rejection,
    SchemaRef,
    Segment,
    Status,
    Table,
    TablePart,
    Tag,
    Version,
    Versioned,
)
from projector.ports import StaleBatchError
from projector.stores import sql_history, sql_tables

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

FORMAT_VERSION = 11
"""Bumped whenever the tables change; an older store is rebuilt with ``strata replay``."""

TABLES: dict[str, tuple[dict[str, type], tuple[str, ...]]] = {
    "datasets": (
        {"id": str, "name": str, "created_at": int, "updated_at": int, "deleted": int,
         "schema": bytes, "schema_refs": str, "default_blueprint": str, "segments_created": int,
         "kind": str, "default_segment_table_blueprint": str, "schemaless_layers": int},
        ("id",),
    ),
    "segments": (
        {"dataset_id": str, "segment_id": str, "created_topic": str, "created_partition": int,
         "created_offset": int, "updated_at": int, "position": int},
        ("dataset_id", "segment_id"),
    ),
    "layers": (
        {"dataset_id": str, "segment_id": str, "layer_name": str, "storage_url": str,
         "size_bytes": int, "schema_sha256": str, "properties": bytes, "registered_at": int,
         "registered_topic": str, "registered_partition": int, "registered_offset": int,
         "event_id": str, "num_chunks": int, "index_ranges": str, "properties_schema_sha256": str,
         "properties_batch": bytes},
        ("dataset_id", "segment_id", "layer_name"),
    ),
    "asset_scopes": ({"dataset_id": str, "segment_id": str, "mode": str, "segments": str},
                     ("dataset_id", "segment_id")),
    "schemas": ({"digest": str, "arrow_schema": bytes}, ("digest",)),
    "outcomes": (
        {"event_id": str, "topic": str, "partition": int, "offset": int, "status": str,
         "reason": str},
        ("event_id",),
    ),
    "rejections": (
        {"topic": str, "partition": int, "offset": int, "raw": bytes, "reason": str,
         "event_id": str},
        ("topic", "partition", "offset"),
    ),
    "feed": (
        {"topic": str, "partition": int, "offset": int, "seq": int, "kind": str, "entry_id": str,
         "entry_name": str, "segment_id": str, "layer_name": str, "detail": str, "committed_at": int},
        ("topic", "partition", "offset", "seq"),
    ),
    "offsets": ({"topic": str, "partition": int, "next_offset": int}, ("topic", "partition")),
    "batches": ({"topic": str, "partition": int, "first_offset": int, "next_offset": int, "records": int},
                ("topic", "partition", "first_offset")),
    "layer_chunks": ({"dataset_id": str, "chunk": int, "layers": bytes}, ("dataset_id", "chunk")),
    "tables": (
        {"id": str, "name": str, "created_at": int, "updated_at": int, "arrow_schema": bytes,
         "storage_url": str, "lance_version": int, "deleted": int, "revision": int,
         "default_blueprint": str},
        ("id",),
    ),
    "table_chunks": ({"table_id": str, "chunk": int, "num_rows": int, "rows": bytes, "origins": bytes},
                     ("table_id", "chunk")),
    "table_row_history": (
        {"table_id": str, "valid_to": int, "chunk": int, "num_rows": int, "rows": bytes, "origins": bytes},
        ("table_id", "valid_to", "chunk")),
    "table_keys": ({"table_id": str, "key": str, "chunk": int}, ("table_id", "key", "chunk")),
    "table_keyed": ({"table_id": str}, ("table_id",)),
    "table_parts": (
        {"table_id": str, "write_id": str, "part": int, "parts": int, "mode": str, "rows": bytes},
        ("table_id", "write_id", "part"),
    ),
    "tags": sql_history.TAGS,
    **sql_history.TABLES,
}
"""``batches`` records how the projection was applied, not what it holds: per committed batch and
partition, the offsets it folded (``first_offset`` up to ``next_offset``) and how many records.
Exactly-once application shows as ranges that tile the log without overlap.

``feed`` is the change feed (``projector.model.Change``): each batch's changes, committed with
them, stamped with the commit's time.

``layer_chunks`` is derived: each dataset's layer table (see ``projector.layer_table``) in
chunks of consecutive segment positions, rewritten with the rows they are made of.

``table_chunks``, ``table_keys``, ``table_keyed`` and ``table_parts`` hold the rows of created
tables, the index that upserts use, and the parts of writes still waiting for their last part;
``table_row_history`` the rows writes replaced or removed (see ``projector.stores.sql_tables``)."""

INDEXES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("datasets", ("name",)), ("outcomes", ("topic", "partition", "offset")),
    ("segments", ("dataset_id", "position")), ("layers", ("dataset_id", "layer_name")),
    ("tables", ("name",)), ("feed", ("offset", "seq")), ("feed", ("entry_id", "offset", "seq")))
"""Secondary indexes, besides each table's primary key."""

_LAYER_TABLE_COLUMNS = (
    "l.segment_id, l.layer_name, l.storage_url, l.size_bytes, l.registered_at, l.schema_sha256, "
    "coalesce(l.properties, ?), l.num_chunks, l.index_ranges, coalesce(l.properties_schema_sha256, ''), "
    "coalesce(l.properties_batch, ?), l.registered_offset, s.position")
"""A layer's columns in ``projector.layer_table`` order, of ``layers l`` joined with ``segments
s``; their parameters: the empty bytes, twice."""
_HISTORY_LAYERS = (
    f"select {_LAYER_TABLE_COLUMNS}, ?, l.event_id, l.registered_topic, l.registered_partition "
    "from layers l join segments s using (dataset_id, segment_id) where l.dataset_id = ?")
"""Stored layers as rows of ``layer_table.HISTORY_COLUMNS``; parameters: the empty bytes twice,
the closing offset, the dataset id."""
_CHUNK_LAYERS = (
    f"select {_LAYER_TABLE_COLUMNS} "
    "from segments s join layers l using (dataset_id, segment_id) "
    "where s.dataset_id = ? and s.position >= ? and s.position < ? "
    "order by s.position, l.registered_topic, l.registered_partition, l.registered_offset")
"""Its parameters: the empty bytes (twice), the dataset id, the first and the last position."""


@functools.lru_cache(maxsize=4096)
def _id_text(dataset_id: uuid.UUID) -> str:
    """A dataset id as stored: converted once, not once per row of a batch."""
    return str(dataset_id)


def _micros(value: datetime) -> int:
    return (value - _EPOCH) // timedelta(microseconds=1)


def _datetime(micros: int) -> datetime:
    return _EPOCH + timedelta(microseconds=micros)


class Contents(Protocol):
    """What a store's contents are copied from: another store, or a snapshot."""

    def next_offsets(self) -> dict[tuple[str, int], int]: ...

    def rows(self, table: str) -> list[tuple[Any, ...]]: ...


class SqlStore:
    """The projection store on a SQL database: ``ProjectionWriter`` for the projector,
    ``CatalogReader`` for clients. Subclasses open the connection (``_conn``, used under
    ``_lock``) and provide the hooks below."""

    _conn: Any
    _lock: threading.Lock
    location: str
    """Where the store is, for messages (a path, or a URL without its password)."""

    # -- what a backend provides --------------------------------------------------------------

    @contextlib.contextmanager
    def _faults(self) -> Iterator[None]:
        """The backend's errors of being unreachable, read-only, full or locked raised as
        ``StoreUnavailableError`` naming this store."""
        raise NotImplementedError

    @contextlib.contextmanager
    def _write_transaction(self) -> Iterator[None]:
        """One transaction that no other writer interleaves with: committed on success, rolled
        back on any error. Waiting readers are woken once it commits."""
        raise NotImplementedError

    def _sql(self, statement: str) -> str:
        """``statement`` in the backend's parameter style."""
        return statement

    def _executemany(self, statement: str, rows: Sequence[Sequence[Any]]) -> None:
        raise NotImplementedError

    def _upsert_many(self, table: str, rows: Sequence[Sequence[Any]]) -> None:
        """Insert ``rows`` (with distinct keys) into ``table``, replacing rows of the same key."""
        self._executemany(upsert(table), rows)

    def _key_rows(self, keys: list[str]) -> tuple[str, Any]:
        """A subquery of one text column ``value`` holding ``keys``, and its one parameter."""
        raise NotImplementedError

    def _key_in(self, keys: list[str]) -> tuple[str, Any]:
        """A condition that column ``key`` is one of ``keys``, and its one parameter."""
        subquery, param = self._key_rows(keys)
        return f"key in ({subquery})", param

    def data_version(self) -> int:
        """A number that changes whenever another connection commits to the store: a cheap check
        (no table is read) of whether anything needs reading again."""
        raise NotImplementedError

    def wait_for_commit(self, version: int, timeout_secs: float) -> int:
        """Block until ``data_version()`` differs from ``version`` or ``timeout_secs`` have passed;
        return the data version."""
        raise NotImplementedError

    def close(self) -> None:
        self._conn.close()

    def _execute(self, statement: str, params: Sequence[Any] = ()) -> Any:
        """Runs inside ``_write_transaction`` or under ``_lock``; returns the cursor."""
        return self._conn.execute(self._sql(statement), params)

    def _blobs(self, statement: str, params: Sequence[Any]) -> list[bytes]:
        """The one blob column of ``statement``'s rows (under ``_lock``)."""
        return [blob for (blob,) in self._execute(statement, params)]

    def _query(self, sql: str, params: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
        with self._lock, self._faults():
            cursor = self._execute(sql, params)
            names = [column[0] for column in cursor.description]
            return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]

    def _statements_in(self, sql: str, fixed: tuple[Any, ...], values: list[str]
                       ) -> Iterator[tuple[str, tuple[Any, ...]]]:
        """``sql``, whose last condition is ``in ({})``, as statements with their parameters
        that together cover ``values``: chunks of ``?`` that SQLite accepts."""
        for start in range(0, len(values), _IN_CHUNK):
            chunk = values[start:start + _IN_CHUNK]
            yield sql.format(", ".join("?" * len(chunk))), (*fixed, *chunk)

    def _query_in(self, sql: str, fixed: tuple[Any, ...], values: list[str]) -> list[dict[str, Any]]:
        """``sql`` ending in ``in ({})`` run for ``values`` (see ``_statements_in``)."""
        return [row for statement, params in self._statements_in(sql, fixed, values)
                for row in self._query(statement, params)]

    def batch_view(self, records: Sequence[LogRecord]) -> CatalogView:
        """A view for folding ``records``: the outcomes, segments and layers they will look up
        are read in a few bulk queries instead of one query per record."""
        event_ids = sorted({str(r.event.event_id) for r in records if r.event is not None})
        decided = {uuid.UUID(row["event_id"]) for row in self._query_in(
            "select event_id from outcomes where event_id in ({})", (), event_ids)}
        wanted: dict[uuid.UUID, set[str]] = {}
        digests: set[str] = set()
        for event in (r.event for r in records if r.event is not None):
            command = event.command
            if isinstance(command, RegisterLayer):
                wanted.setdefault(event.dataset_id, set()).add(command.segment_id)
                digests.update((command.schema_sha256, command.properties_schema_sha256))
            elif isinstance(command, DefineSchema):
                digests.add(command.sha256)
        digests.discard("")
        known = self.schemas(sorted(digests))
        segments, layers = self.segments_with_layers(wanted)
        covered = {(d, s) for d, ids in wanted.items() for s in ids}
        return _BatchView(self, frozenset(map(uuid.UUID, event_ids)), decided, covered, segments, layers,
                          frozenset(digests), known)

    def segments_with_layers(self, wanted: Mapping[uuid.UUID, Iterable[str]]
                             ) -> tuple[dict[tuple[uuid.UUID, str], Segment],
                                        dict[tuple[uuid.UUID, str, str], Layer]]:
        """Of ``wanted`` (dataset id: segment ids), the segments that exist, by (dataset id,
        segment id), and all their layers, by (dataset id, segment id, layer name); read in bulk."""
        segments: dict[tuple[uuid.UUID, str], Segment] = {}
        layers: dict[tuple[uuid.UUID, str, str], Layer] = {}
        for dataset_id, segment_ids in wanted.items():
            ids = sorted(segment_ids)
            for row in self._query_in("select * from segments where dataset_id = ? and segment_id in ({})",
                                      (str(dataset_id),), ids):
                segment = _segment(row)
                segments[(segment.dataset_id, segment.segment_id)] = segment
            for row in self._query_in("select * from layers where dataset_id = ? and segment_id in ({})",
                                      (str(dataset_id),), ids):
                layer = _layer(row)
                layers[(layer.dataset_id, layer.segment_id, layer.layer_name)] = layer
        return segments, layers

    # -- the fold's reads ---------------------------------------------------------------------

    def dataset(self, dataset_id: uuid.UUID) -> Dataset | None:
        rows = self._query("select * from datasets where id = ?", (str(dataset_id),))
        return _dataset(rows[0]) if rows else None

    def dataset_by_name(self, name: str) -> Dataset | None:
        rows = self._query("select * from datasets where name = ? and deleted = 0", (name,))
        return _dataset(rows[0]) if rows else None

    def segment(self, dataset_id: uuid.UUID, segment_id: str) -> Segment | None:
        rows = self._query("select * from segments where dataset_id = ? and segment_id = ?",
                           (str(dataset_id), segment_id))
        return _segment(rows[0]) if rows else None

    def layer(self, dataset_id: uuid.UUID, segment_id: str, layer_name: str) -> Layer | None:
        rows = self._query(
            "select * from layers where dataset_id = ? and segment_id = ? and layer_name = ?",
            (str(dataset_id), segment_id, layer_name))
        return _layer(rows[0]) if rows else None

    def matching_layers(self, dataset_id: uuid.UUID, segment_ids: frozenset[str],
                        layer_names: frozenset[str]) -> list[Layer]:
        wanted = sorted(layer_names)
        sql = "select * from layers where dataset_id = ?"
        if wanted:
            sql += f" and layer_name in ({', '.join('?' * len(wanted))})"
        fixed = (str(dataset_id), *wanted)
        if not segment_ids:
            return [_layer(row) for row in self._query(sql, fixed)]
        return [_layer(row) for row in self._query_in(sql + " and segment_id in ({})", fixed,
                                                      sorted(segment_ids))]

    def asset_scope(self, dataset_id: uuid.UUID, segment_id: str) -> AssetScope | None:
        rows = self._query("select * from asset_scopes where dataset_id = ? and segment_id = ?",
                           (str(dataset_id), segment_id))
        return _asset_scope(rows[0]) if rows else None

    def asset_scopes(self, dataset_id: uuid.UUID) -> list[AssetScope]:
        return [_asset_scope(r) for r in self._query("select * from asset_scopes where dataset_id = ? "
                                                     "order by segment_id", (str(dataset_id),))]

    def tag(self, dataset_id: uuid.UUID, name: str) -> Tag | None:
        rows = self._query("select * from tags where dataset_id = ? and name = ?", (str(dataset_id), name))
        return _tag(rows[0]) if rows else None

    def tags(self, dataset_id: uuid.UUID) -> list[Tag]:
        rows = self._query('select * from tags where dataset_id = ? order by "offset", name',
                           (str(dataset_id),))
        return [_tag(r) for r in rows]

    def schema(self, digest: str) -> bytes | None:
        rows = self._query("select arrow_schema from schemas where digest = ?", (digest,))
        return rows[0]["arrow_schema"] if rows else None

    def schemas(self, digests: Sequence[str]) -> dict[str, bytes]:
        """The schemas the store holds of ``digests``, by digest."""
        return {row["digest"]: row["arrow_schema"] for row in self._query_in(
            "select digest, arrow_schema from schemas where digest in ({})", (), list(digests))}

    def has_outcome(self, event_id: uuid.UUID) -> bool:
        return bool(self._query("select 1 from outcomes where event_id = ?", (str(event_id),)))

    def table(self, table_id: uuid.UUID) -> Table | None:
        rows = self._query("select * from tables where id = ?", (str(table_id),))
        return _table(rows[0]) if rows else None

    def table_by_name(self, name: str) -> Table | None:
        rows = self._query("select * from tables where name = ? and deleted = 0", (name,))
        return _table(rows[0]) if rows else None

    def table_parts(self, table_id: uuid.UUID, write_id: str) -> list[TablePart]:
        rows = self._query("select * from table_parts where table_id = ? and write_id = ? order by part",
                           (str(table_id), write_id))
        return [TablePart(uuid.UUID(r["table_id"]), r["write_id"], r["part"], r["parts"],
                          TableWriteMode(r["mode"]), r["rows"]) for r in rows]

    # -- offsets and the atomic commit --------------------------------------------------------

    def next_offsets(self) -> dict[tuple[str, int], int]:
        return {(r["topic"], r["partition"]): r["next_offset"]
                for r in self._query("select * from offsets")}

    def next_offset(self, topic: str, partition: int) -> int:
        rows = self._query("select next_offset from offsets where topic = ? and partition = ?",
                           (topic, partition))
        return rows[0]["next_offset"] if rows else 0

    def commit(self, changes: Changes, *, expected_offsets: dict[tuple[str, int], int]) -> None:
        committed_at = _micros(datetime.now(UTC))
        rows = {
            "datasets": [_dataset_values(d) for d in changes.datasets.values()],
            "segments": [_segment_values(s) for s in changes.segments.values() if s is not None],
            "layers": [_layer_values(x) for x in changes.layers.values() if x is not None],
            "asset_scopes": [_scope_values(a) for a in changes.asset_scopes.values() if a is not None],
            "schemas": list(changes.schemas.items()),
            "tags": [_tag_values(t) for t in changes.tags.values() if t is not None],
            "tables": [_table_values(t) for t in changes.tables.values()],
            "table_parts": [(str(p.table_id), p.write_id, p.part, p.parts, str(p.mode), p.rows)
                            for p in changes.table_parts.values() if p is not None],
            "outcomes": [_outcome_values(o) for o in changes.outcomes.values()],
            "rejections": [_rejection_values(r) for r in changes.rejections],
            "feed": [_change_values(c, committed_at) for c in changes.feed],
            "offsets": [(t, p, o) for (t, p), o in changes.next_offsets.items()],
            "batches": [(t, p, first, changes.next_offsets[(t, p)], changes.records[(t, p)])
                        for (t, p), first in changes.first_offsets.items()],
        }
        # The connection's context rolls the transaction back on any error, so a batch that
        # cannot be written (read-only or full disk) leaves the store exactly as it was.
        statements = sql_tables.Statements(self._execute, self._key_rows, self._key_in)
        with self._write_transaction():
            stored = {(t, p): o for t, p, o in
                      self._execute("select topic, partition, next_offset from offsets")}
            if stored != expected_offsets:
                raise StaleBatchError(
                    f"store offsets moved from {expected_offsets} to {stored} during the batch")
            chunks = self._touched_chunks(changes)
            self._keep_history(changes.history)
            purged = [(str(dataset_id),) for dataset_id in changes.purged]
            for table in ("segments", "layers", "layer_chunks", "asset_scopes", "tags"):
                self._executemany(f"delete from {table} where dataset_id = ?", purged)
            self._executemany("delete from tags where dataset_id = ? and name = ?",
                              [(str(d), n) for (d, n), tag in changes.tags.items() if tag is None])
            tables = sql_tables.Writer(statements)
            self._executemany(
                "delete from table_parts where table_id = ? and write_id = ? and part = ?",
                [(str(t), w, n) for (t, w, n), part in changes.table_parts.items() if part is None])
            self._executemany(
                "delete from segments where dataset_id = ? and segment_id = ?",
                [(str(d), s) for (d, s), segment in changes.segments.items() if segment is None])
            self._executemany(
                "delete from asset_scopes where dataset_id = ? and segment_id = ?",
                [(str(d), s) for (d, s), scope in changes.asset_scopes.items() if scope is None])
            self._executemany(
                "delete from layers where dataset_id = ? and segment_id = ? and layer_name = ?",
                [(str(d), s, n) for (d, s, n), layer in changes.layers.items() if layer is None])
            for table, values in rows.items():
                if values:
                    self._upsert_many(table, values)
            self._rewrite_chunks(chunks)
            for write in changes.table_writes:
                tables.apply(write)
            for version in changes.history:  # after the writes: a table deleted later in the batch
                if version.kind is Versioned.PURGE:
                    tables.remove(str(version.key[0]), version.offset)
            tables.finish()

    def _keep_history(self, history: list[Version]) -> None:
        """Lay down the batch's versions (``projector.stores.sql_history``): end the versions the
        store held where the batch first changed their rows or purged their entry, then add the
        batch's own. Runs inside ``commit``'s transaction, before the current tables change."""
        found = sql_history.spans(history)
        closing: dict[Versioned, list[tuple[Any, ...]]] = {}
        for kind, key, offset in found.first_touches:
            closing.setdefault(kind, []).append((offset, *map(_key_text, key)))
        closed_layers = self._close_stored_layers(closing.pop(Versioned.LAYER, []), found.purges)
        for kind, rows in closing.items():
            kept = sql_history.KEPT[kind]
            where = " and ".join(f"{names([c])} = ?" for c in kept.key)
            self._executemany(f"update {kept.table} set valid_to = ? where {where} and valid_to is null",
                              rows)
        for entry_id, offset in found.purges:
            for kind in (Versioned.SEGMENT, Versioned.ASSET_SCOPE, Versioned.TAG):
                self._execute(f"update {sql_history.KEPT[kind].table} set valid_to = ? "
                              "where dataset_id = ? and valid_to is null", (offset, str(entry_id)))
        merged_schemas: dict[bytes, str] = {}
        added: dict[str, list[tuple[Any, ...]]] = {}
        for span in found.spans:
            if span.kind is Versioned.LAYER:
                continue
            if span.kind is Versioned.DATASET:
                values = _dataset_history_values(span.row, merged_schemas)
            else:
                values = _HISTORY_VALUES[span.kind](span.row)
            added.setdefault(sql_history.KEPT[span.kind].table, []).append(
                (*values, span.valid_from, span.valid_to))
        if merged_schemas:
            self._upsert_many("schemas", [(digest, merged) for merged, digest in merged_schemas.items()])
        for table, rows in added.items():
            self._executemany(insert(table), rows)
        self._add_closed_layers(closed_layers, found.spans)

    def _close_stored_layers(self, first_touches: list[tuple[Any, ...]], purges: list[tuple[Any, int]]
                             ) -> dict[str, list[tuple[Any, ...]]]:
        """The stored layers the batch replaces or removes (``first_touches``: (offset, dataset,
        segment, layer)) or purges, as rows of ``HISTORY_COLUMNS`` by dataset, closed at that
        offset; the replaced and removed ones are deleted from ``layers`` here."""
        closed: dict[str, list[tuple[Any, ...]]] = {}
        wanted: dict[str, dict[tuple[str, str], int]] = {}
        for offset, dataset, segment_id, layer_name in first_touches:
            wanted.setdefault(dataset, {})[(segment_id, layer_name)] = offset
        for dataset, keys in wanted.items():
            for statement, params in self._statements_in(
                    _HISTORY_LAYERS + " and l.segment_id in ({})", (b"", b"", 0, dataset),
                    sorted({segment_id for segment_id, _ in keys})):
                for row in self._execute(statement, params).fetchall():
                    offset = keys.get((row[0], row[1]))
                    if offset is not None:
                        closed.setdefault(dataset, []).append((*row[:13], offset, *row[14:]))
        self._executemany("delete from layers where dataset_id = ? and segment_id = ? and layer_name = ?",
                          [r[1:] for r in first_touches])
        for entry_id, offset in purges:
            rows = self._execute(_HISTORY_LAYERS, (b"", b"", offset, str(entry_id))).fetchall()
            if rows:
                closed.setdefault(str(entry_id), []).extend(rows)
        return closed

    def _add_closed_layers(self, closed: dict[str, list[tuple[Any, ...]]], spans: list[sql_history.Span]
                           ) -> None:
        """Add the closed layers (``closed``, and the layer versions of ``spans`` that the batch
        both opened and closed) to ``layer_history``, each chunk they fall in rewritten once."""
        positions = self._positions(spans)
        for span in spans:
            if span.kind is Versioned.LAYER and span.valid_to is not None:
                layer = span.row
                position = positions[(_id_text(layer.dataset_id), layer.segment_id, span.valid_from)]
                closed.setdefault(_id_text(layer.dataset_id), []).append(
                    (layer.segment_id, layer.layer_name, layer.storage_url, layer.size_bytes,
                     _micros(layer.registered_at), layer.schema_sha256, layer.properties, layer.num_chunks,
                     _layer_table.ranges_text(layer.index_ranges), layer.properties_schema_sha256,
                     layer.properties_batch, layer.registered_by.offset, position, span.valid_to,
                     str(layer.event_id), layer.registered_by.topic, layer.registered_by.partition))
        size = sql_history.HISTORY_CHUNK_OFFSETS
        for dataset, rows in closed.items():
            by_chunk: dict[int, list[tuple[Any, ...]]] = {}
            for row in rows:
                by_chunk.setdefault(row[13] // size, []).append(row)
            for chunk, chunk_rows in by_chunk.items():
                blobs = self._blobs("select layers from layer_history where dataset_id = ? and chunk = ?",
                                    (dataset, chunk))
                table = pa.concat_tables([_layer_table.from_ipc(blobs, _layer_table.HISTORY_COLUMNS),
                                          _layer_table.from_rows(chunk_rows, _layer_table.HISTORY_COLUMNS)])
                table = table.sort_by([("valid_to", "ascending"), ("segment_id", "ascending"),
                                       ("layer_name", "ascending")])
                self._execute(upsert("layer_history"), (dataset, chunk, _layer_table.to_ipc(table)))

    def _positions(self, spans: list[sql_history.Span]) -> dict[tuple[str, str, int], int]:
        """The segment position of each layer version of ``spans`` that the batch closed, by
        (dataset, segment, the offset it was opened at): from the batch's segment versions, else
        from the store's segment (read before the batch changes it)."""
        segments: dict[tuple[str, str], list[sql_history.Span]] = {}
        for span in spans:
            if span.kind is Versioned.SEGMENT:
                segments.setdefault((_id_text(span.key[0]), span.key[1]), []).append(span)
        found: dict[tuple[str, str, int], int] = {}
        missing: dict[str, set[str]] = {}
        for span in spans:
            if span.kind is not Versioned.LAYER or span.valid_to is None:
                continue
            key = (_id_text(span.key[0]), span.key[1])
            opened = span.valid_from
            position = next((s.row.position for s in segments.get(key, ())
                             if s.valid_from <= opened and (s.valid_to is None or s.valid_to > opened)), None)
            if position is None:
                missing.setdefault(key[0], set()).add(key[1])
            else:
                found[(*key, opened)] = position
        stored: dict[tuple[str, str], int] = {}
        for dataset, segment_ids in missing.items():
            for statement, params in self._statements_in(
                    "select segment_id, position from segments where dataset_id = ? and segment_id in ({})",
                    (dataset,), sorted(segment_ids)):
                stored.update({(dataset, s): p for s, p in self._execute(statement, params)})
        for span in spans:
            if span.kind is Versioned.LAYER and span.valid_to is not None:
                key = (_id_text(span.key[0]), span.key[1])
                if (*key, span.valid_from) not in found:
                    found[(*key, span.valid_from)] = stored[key]
        return found

    def at(self, offset: int) -> PointReader:
        """The catalog as of the log prefix ``[0, offset)`` (see ``PointReader``)."""
        return PointReader(self, offset)

    def _touched_chunks(self, changes: Changes) -> set[tuple[str, int]]:
        """The (dataset id, chunk) of every segment the batch adds, changes or removes: where it
        is now and where it will be. Runs inside ``commit``'s transaction, before its writes."""
        chunks = {(_id_text(s.dataset_id), s.position // _layer_table.CHUNK_SEGMENTS)
                  for s in changes.segments.values() if s is not None}
        touched: dict[str, set[str]] = {}
        for dataset_id, segment_id in [*changes.segments, *((d, s) for d, s, _ in changes.layers)]:
            if dataset_id not in changes.purged:
                touched.setdefault(_id_text(dataset_id), set()).add(segment_id)
        for dataset_text, segment_ids in touched.items():
            for statement, params in self._statements_in(
                    "select position from segments where dataset_id = ? and segment_id in ({})",
                    (dataset_text,), sorted(segment_ids)):
                chunks.update((dataset_text, position // _layer_table.CHUNK_SEGMENTS)
                              for (position,) in self._execute(statement, params))
        return chunks

    def _rewrite_chunks(self, chunks: set[tuple[str, int]]) -> None:
        size = _layer_table.CHUNK_SEGMENTS
        for dataset_id, chunk in sorted(chunks):
            start = chunk * size
            rows = self._execute(_CHUNK_LAYERS, (b"", b"", dataset_id, start, start + size)).fetchall()
            if rows:
                self._execute(upsert("layer_chunks"),
                              (dataset_id, chunk, _layer_table.to_ipc(_layer_table.from_rows(rows))))
            else:
                self._execute("delete from layer_chunks where dataset_id = ? and chunk = ?",
                                   (dataset_id, chunk))

    def replace_contents(self, source: Contents) -> bool:
        """Make this store a copy of ``source`` (a store of either backend, that nothing writes
        meanwhile) in one transaction, if
        ``source`` has applied at least every record this store has; else change nothing and
        return False.

        Readers see the old contents or the new, never a mix. The copy is the only work done while
        this store is locked for writing: a projector writing to it waits for no more than that,
        and its next batch skips the records the new contents already hold.
        """
        theirs = source.next_offsets()
        with self._write_transaction():
            for t, p, o in self._execute("select topic, partition, next_offset from offsets"):
                if theirs.get((t, p), 0) < o:
                    return False
            for table in TABLES:
                self._execute(f"delete from {table}")
                self._executemany(insert(table), source.rows(table))
        return True

    def snapshot_rows(self) -> dict[str, list[tuple[Any, ...]]]:
        """Every row of every table, as ``rows`` gives them, all as of one commit."""
        with self._lock, self._faults(), self._read_transaction():
            return {table: [tuple(row) for row in self._execute(
                f"select {names(columns)} from {table} order by {names(key)}")]
                for table, (columns, key) in TABLES.items()}

    def _read_transaction(self) -> contextlib.AbstractContextManager[None]:
        """A transaction whose reads all see one commit (under ``_lock``)."""
        raise NotImplementedError

    def rows(self, table: str) -> list[tuple[Any, ...]]:
        """Every row of ``table`` (one of ``TABLES``), in its columns' order, by primary key."""
        columns, key = TABLES[table]
        with self._lock, self._faults():
            return [tuple(row) for row in self._execute(
                f"select {names(columns)} from {table} order by {names(key)}")]

    def counts(self) -> dict[str, int]:
        """Rows per table (live datasets only), for summaries."""
        counts = {table: self._query(f"select count(*) as n from {table}")[0]["n"] for table in TABLES}
        counts["datasets"] = self._query("select count(*) as n from datasets where deleted = 0 and kind = ?",
                                         (DatasetKind.DATASET.value,))[0]["n"]
        return counts

    # -- the SDK's reads ----------------------------------------------------------------------

    def outcome(self, event_id: uuid.UUID) -> Outcome | None:
        rows = self._query("select * from outcomes where event_id = ?", (str(event_id),))
        return _outcome(rows[0]) if rows else None

    def outcomes(self, event_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, Outcome]:
        """The recorded outcomes of ``event_ids`` (those the projector has applied), by event id:
        a few statements however many there are."""
        rows = self._query_in("select * from outcomes where event_id in ({})", (),
                              sorted({str(e) for e in event_ids}))
        return {uuid.UUID(row["event_id"]): _outcome(row) for row in rows}

    def outcome_at(self, position: LogPosition) -> Outcome | None:
        """The outcome of the event at a log position, e.g. one a pipeline producer appended."""
        rows = self._query('select * from outcomes where topic = ? and partition = ? and "offset" = ?',
                           (position.topic, position.partition, position.offset))
        return _outcome(rows[0]) if rows else None

    def datasets(self) -> list[Dataset]:
        """The live datasets (not the deleted ones), oldest first."""
        return [_dataset(r) for r in
                self._query("select * from datasets where deleted = 0 order by created_at, id")]

    def segments(self, dataset_id: uuid.UUID) -> list[Segment]:
        rows = self._query(
            "select * from segments where dataset_id = ? "
            "order by created_topic, created_partition, created_offset", (str(dataset_id),))
        return [_segment(r) for r in rows]

    def layers(self, dataset_id: uuid.UUID) -> list[Layer]:
        rows = self._query(
            "select l.* from layers l join segments s using (dataset_id, segment_id) "
            "where l.dataset_id = ? order by s.created_topic, s.created_partition, "
            "s.created_offset, l.registered_topic, l.registered_partition, l.registered_offset",
            (str(dataset_id),))
        return [_layer(r) for r in rows]

    def layer_table(self, dataset_id: uuid.UUID) -> pa.Table:
        """``layers`` as one Arrow table (``projector.layer_table.LAYER_COLUMNS``), read from the
        dataset's chunks without converting its rows to Python values."""
        with self._lock, self._faults():
            blobs = self._blobs("select layers from layer_chunks where dataset_id = ? order by chunk",
                                (str(dataset_id),))
        return _layer_table.from_ipc(blobs)

    def tables(self) -> list[Table]:
        """The live tables (not the deleted ones), oldest first."""
        return [_table(r) for r in
                self._query("select * from tables where deleted = 0 order by created_at, id")]

    def table_data(self, table: Table) -> pa.Table:
        """The rows of a created table, in its schema (field metadata included)."""
        schema = table_rows.table_schema(table.arrow_schema)
        with self._lock, self._faults():
            blobs = self._blobs("select rows from table_chunks where table_id = ? order by chunk",
                                (str(table.id),))
        return table_rows.from_ipc(blobs, schema)

    def segment_layer_table(self, dataset_id: uuid.UUID, segment_id: str) -> pa.Table:
        """The segment's rows of ``layer_table``, from the one chunk that holds its position."""
        found = self._query("select position from segments where dataset_id = ? and segment_id = ?",
                            (str(dataset_id), segment_id))
        if not found:
            return _layer_table.LAYER_COLUMNS.empty_table()
        with self._lock, self._faults():
            blobs = self._blobs("select layers from layer_chunks where dataset_id = ? and chunk = ?",
                                (str(dataset_id), found[0]["position"] // _layer_table.CHUNK_SEGMENTS))
        chunk = _layer_table.from_ipc(blobs)
        return chunk.filter(pc.equal(chunk["segment_id"], segment_id))

    def rejections(self) -> list[Rejection]:
        rows = self._query('select * from rejections order by topic, partition, "offset"')
        return [Rejection(LogPosition(r["topic"], r["partition"], r["offset"]), r["raw"],
                          r["reason"], uuid.UUID(r["event_id"]) if r["event_id"] else None)
                for r in rows]

    def changes(self, after: tuple[int, int] = (-1, 0), *, entry_id: uuid.UUID | None = None,
                limit: int = 1000) -> list[Change]:
        """At most ``limit`` entries of the change feed that come after the cursor ``after``
        ((offset, seq); the default is before the first), in feed order; of one entry if
        ``entry_id`` is given."""
        offset, seq = after
        sql = 'select * from feed where ("offset" > ? or ("offset" = ? and seq > ?))'
        params: tuple[Any, ...] = (offset, offset, seq)
        if entry_id is not None:
            sql += " and entry_id = ?"
            params += (str(entry_id),)
        return [_change(r) for r in self._query(sql + ' order by "offset", seq limit ?', (*params, limit))]


_IN_CHUNK = 500


class PointReader:
    """The catalog as of the log prefix ``[0, offset)``, read from the store's history
    (``projector.stores.sql_history``): the entries, segments, layers and asset scopes the store
    held after folding exactly those records, equal to what a store rebuilt from that prefix
    answers now. Read-only, as every client's reader."""

    def __init__(self, store: SqlStore, offset: int) -> None:
        self._store = store
        self.offset = offset
        self.location = store.location

    def __repr__(self) -> str:
        return f"PointReader({self.location!r}, offset={self.offset})"

    def _versions(self, table: str, condition: str, params: tuple[Any, ...],
                  order: str) -> list[dict[str, Any]]:
        return self._store._query(f"select * from {table} where {condition} and {sql_history.visible()} "
                                  f"order by {order}", (*params, self.offset, self.offset))

    def _dataset(self, row: dict[str, Any]) -> Dataset:
        digest = row["schema_digest"]
        return _dataset({**row, "schema": self._store.schema(digest) if digest else b""})

    def datasets(self) -> list[Dataset]:
        rows = self._versions("dataset_history", "deleted = 0", (), "created_at, id")
        return [self._dataset(r) for r in rows]

    def dataset(self, dataset_id: uuid.UUID) -> Dataset | None:
        rows = self._versions("dataset_history", "id = ?", (str(dataset_id),), "id")
        return self._dataset(rows[0]) if rows else None

    def dataset_by_name(self, name: str) -> Dataset | None:
        rows = self._versions("dataset_history", "name = ? and deleted = 0", (name,), "id")
        return self._dataset(rows[0]) if rows else None

    def segments(self, dataset_id: uuid.UUID) -> list[Segment]:
        return [_segment(r) for r in self._versions("segment_history", "dataset_id = ?", (str(dataset_id),),
                                                    "created_topic, created_partition, created_offset")]

    def _closed_layers(self, dataset_id: uuid.UUID) -> pa.Table:
        """The dataset's replaced and removed layers that were its layers at the point."""
        with self._store._lock, self._store._faults():
            blobs = self._store._blobs(
                "select layers from layer_history where dataset_id = ? and chunk >= ? order by chunk",
                (str(dataset_id), self.offset // sql_history.HISTORY_CHUNK_OFFSETS))
        closed = _layer_table.from_ipc(blobs, _layer_table.HISTORY_COLUMNS)
        return closed.filter(pc.and_(pc.less(closed["registered_offset"], self.offset),
                                     pc.greater_equal(closed["valid_to"], self.offset)))

    def layer_table(self, dataset_id: uuid.UUID) -> pa.Table:
        return self._layer_table(dataset_id, self._closed_layers(dataset_id))

    def _layer_table(self, dataset_id: uuid.UUID, closed: pa.Table) -> pa.Table:
        return _layer_table.at_offset(self._store.layer_table(dataset_id), closed, self.offset)

    def segment_layer_table(self, dataset_id: uuid.UUID, segment_id: str) -> pa.Table:
        layers = self.layer_table(dataset_id)
        return layers.filter(pc.equal(layers["segment_id"], segment_id))

    def layers(self, dataset_id: uuid.UUID) -> list[Layer]:
        """``layer_table``'s rows as ``Layer`` values, in its order."""
        now = {(x.segment_id, x.layer_name, x.registered_by.offset): x
               for x in self._store.layers(dataset_id)}
        closed_layers = self._closed_layers(dataset_id)
        closed = {(r["segment_id"], r["layer_name"], r["registered_offset"]): r
                  for r in closed_layers.to_pylist()}
        keys = self._layer_table(dataset_id, closed_layers).select(
            ["segment_id", "layer_name", "registered_offset"])
        return [now.get(key) or _closed_layer(dataset_id, closed[key])
                for key in zip(*(keys[name].to_pylist() for name in keys.column_names), strict=True)]

    def tag(self, dataset_id: uuid.UUID, name: str) -> Tag | None:
        rows = self._versions("tag_history", "dataset_id = ? and name = ?", (str(dataset_id), name), "name")
        return _tag(rows[0]) if rows else None

    def tags(self, dataset_id: uuid.UUID) -> list[Tag]:
        return [_tag(r) for r in self._versions("tag_history", "dataset_id = ?", (str(dataset_id),),
                                                '"offset", name')]

    def asset_scope(self, dataset_id: uuid.UUID, segment_id: str) -> AssetScope | None:
        rows = self._versions("asset_scope_history", "dataset_id = ? and segment_id = ?",
                              (str(dataset_id), segment_id), "segment_id")
        return _asset_scope(rows[0]) if rows else None

    def asset_scopes(self, dataset_id: uuid.UUID) -> list[AssetScope]:
        return [_asset_scope(r) for r in self._versions("asset_scope_history", "dataset_id = ?",
                                                        (str(dataset_id),), "segment_id")]

    def schema(self, digest: str) -> bytes | None:
        return self._store.schema(digest)

    def schemas(self, digests: Sequence[str]) -> dict[str, bytes]:
        return self._store.schemas(digests)

    def table(self, table_id: uuid.UUID) -> Table | None:
        rows = self._versions("table_history", "id = ?", (str(table_id),), "id")
        return _table(rows[0]) if rows else None

    def table_by_name(self, name: str) -> Table | None:
        rows = self._versions("table_history", "name = ? and deleted = 0", (name,), "id")
        return _table(rows[0]) if rows else None

    def tables(self) -> list[Table]:
        return [_table(r) for r in self._versions("table_history", "deleted = 0", (), "created_at, id")]

    def table_data(self, table: Table) -> pa.Table:
        now = self._store.table(table.id)
        if now is not None and not now.deleted and now.revision == table.revision:
            return self._store.table_data(table)  # not written since the point
        store, table_id = self._store, str(table.id)
        with store._lock, store._faults(), store._read_transaction():
            current = store._execute("select rows, origins from table_chunks where table_id = ? "
                                     "order by chunk", (table_id,)).fetchall()
            closed = store._execute("select rows, origins from table_row_history where table_id = ? "
                                    "and valid_to >= ? order by valid_to, chunk",
                                    (table_id, self.offset)).fetchall()
        return sql_tables.rows_at([(bytes(r), bytes(o)) for r, o in current],
                                  [(bytes(r), bytes(o)) for r, o in closed], self.offset,
                                  table_rows.table_schema(table.arrow_schema))

    def segments_with_layers(self, wanted: Mapping[uuid.UUID, Iterable[str]]
                             ) -> tuple[dict[tuple[uuid.UUID, str], Segment],
                                        dict[tuple[uuid.UUID, str, str], Layer]]:
        segments, layers = {}, {}
        for dataset_id, segment_ids in wanted.items():
            ids = set(segment_ids)
            segments.update({(dataset_id, s.segment_id): s for s in self.segments(dataset_id)
                             if s.segment_id in ids})
            layers.update({(dataset_id, x.segment_id, x.layer_name): x for x in self.layers(dataset_id)
                           if x.segment_id in ids})
        return segments, layers

    def next_offsets(self) -> dict[tuple[str, int], int]:
        return {(CATALOG_TOPIC, 0): self.offset}

    def data_version(self) -> int:
        return self._store.data_version()

    def wait_for_commit(self, version: int, timeout_secs: float) -> int:
        return self._store.wait_for_commit(version, timeout_secs)

    def outcome(self, event_id: uuid.UUID) -> Outcome | None:
        found = self._store.outcome(event_id)
        return found if found is not None and found.position.offset < self.offset else None

    def outcomes(self, event_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, Outcome]:
        return {e: o for e, o in self._store.outcomes(event_ids).items() if o.position.offset < self.offset}

    def outcome_at(self, position: LogPosition) -> Outcome | None:
        return self._store.outcome_at(position) if position.offset < self.offset else None

    def rejections(self) -> list[Rejection]:
        return [r for r in self._store.rejections() if r.position.offset < self.offset]

    def changes(self, after: tuple[int, int] = (-1, 0), *, entry_id: uuid.UUID | None = None,
                limit: int = 1000) -> list[Change]:
        return [c for c in self._store.changes(after, entry_id=entry_id, limit=limit)
                if c.position.offset < self.offset]

    def at(self, offset: int) -> PointReader:
        return PointReader(self._store, offset)

    def close(self) -> None:
        """Nothing to release: the store is its owner's."""


def names(columns: Iterable[str]) -> str:
    """Column names, quoted (``offset`` is a keyword in PostgreSQL), comma-separated."""
    return ", ".join(f'"{c}"' for c in columns)


@functools.cache
def insert(table: str, source: str | None = None) -> str:
    """The statement inserting one row of ``table``, its values in ``TABLES`` order; or, with
    ``source``, every row of the table ``source`` (whose columns are ``table``'s)."""
    columns = TABLES[table][0]
    rows = (f"select {names(columns)} from {source}" if source
            else f"values ({', '.join('?' for _ in columns)})")
    return f"insert into {table} ({names(columns)}) {rows}"


@functools.cache
def upsert(table: str, source: str | None = None) -> str:
    """``insert(table, source)``, replacing the row with the same primary key if there is one."""
    columns, key = TABLES[table]
    others = [c for c in columns if c not in key]
    action = (f"do update set {', '.join(f'{names([c])} = excluded.{names([c])}' for c in others)}"
              if others else "do nothing")
    return f"{insert(table, source)} on conflict ({names(key)}) {action}"


class _BatchView:
    """The store as the fold sees it for one batch, with its point lookups read ahead."""

    def __init__(self, store: SqlStore, event_ids: frozenset[uuid.UUID], decided: set[uuid.UUID],
                 covered: set[tuple[uuid.UUID, str]], segments: dict[tuple[uuid.UUID, str], Segment],
                 layers: dict[tuple[uuid.UUID, str, str], Layer],
                 digests: frozenset[str], schemas: dict[str, bytes]) -> None:
        self._store = store
        self._digests = digests
        self._schemas = schemas
        self._event_ids = event_ids
        self._decided = decided
        self._covered = covered
        self._segments = segments
        self._layers = layers
        self.dataset = store.dataset
        self.dataset_by_name = store.dataset_by_name
        self.matching_layers = store.matching_layers
        self.asset_scope = store.asset_scope
        self.table = store.table
        self.table_by_name = store.table_by_name
        self.table_parts = store.table_parts
        self.tag = store.tag

    def schema(self, digest: str) -> bytes | None:
        if digest in self._digests:
            return self._schemas.get(digest)
        return self._store.schema(digest)

    def segment(self, dataset_id: uuid.UUID, segment_id: str) -> Segment | None:
        if (dataset_id, segment_id) in self._covered:
            return self._segments.get((dataset_id, segment_id))
        return self._store.segment(dataset_id, segment_id)

    def layer(self, dataset_id: uuid.UUID, segment_id: str, layer_name: str) -> Layer | None:
        if (dataset_id, segment_id) in self._covered:
            return self._layers.get((dataset_id, segment_id, layer_name))
        return self._store.layer(dataset_id, segment_id, layer_name)

    def has_outcome(self, event_id: uuid.UUID) -> bool:
        if event_id in self._event_ids:
            return event_id in self._decided
        return self._store.has_outcome(event_id)


# The _*_values functions give a row in the column order of TABLES.


def _dataset_values(d: Dataset) -> tuple[Any, ...]:
    return (str(d.id), d.name, _micros(d.created_at), _micros(d.updated_at), int(d.deleted), d.schema,
            json.dumps([[r.digest, r.layers] for r in d.schema_refs]), d.default_blueprint,
            d.segments_created, str(d.kind), d.default_segment_table_blueprint, d.schemaless_layers)


def _dataset(r: dict[str, Any]) -> Dataset:
    return Dataset(uuid.UUID(r["id"]), r["name"], _datetime(r["created_at"]),
                   _datetime(r["updated_at"]), deleted=bool(r["deleted"]), schema=r["schema"] or b"",
                   schema_refs=tuple(SchemaRef(d, n) for d, n in json.loads(r["schema_refs"])),
                   default_blueprint=r["default_blueprint"], segments_created=r["segments_created"],
                   kind=DatasetKind(r["kind"]),
                   default_segment_table_blueprint=r["default_segment_table_blueprint"],
                   schemaless_layers=r["schemaless_layers"])


def _dataset_history_values(d: Dataset, merged_schemas: dict[bytes, str]) -> tuple[Any, ...]:
    """A dataset version as ``dataset_history`` keeps it: its merged schema by digest, the
    schema itself added to ``merged_schemas`` (schema: digest)."""
    digest = ""
    if d.schema:
        digest = merged_schemas.get(d.schema) or merged_schemas.setdefault(d.schema, schemas.digest(d.schema))
    values = _dataset_values(d)
    return (*values[:5], digest, *values[6:])


def _scope_values(a: AssetScope) -> tuple[Any, ...]:
    return (str(a.dataset_id), a.segment_id, str(a.mode), json.dumps(a.segments))


def _tag_values(t: Tag) -> tuple[Any, ...]:
    return (str(t.dataset_id), t.name, t.offset, _micros(t.created_at))


def _tag(r: dict[str, Any]) -> Tag:
    return Tag(uuid.UUID(r["dataset_id"]), r["name"], r["offset"], _datetime(r["created_at"]))


def _key_text(part: Any) -> Any:
    return _id_text(part) if isinstance(part, uuid.UUID) else part


def _asset_scope(r: dict[str, Any]) -> AssetScope:
    return AssetScope(uuid.UUID(r["dataset_id"]), r["segment_id"], AssetMode(r["mode"]),
                      tuple(json.loads(r["segments"])))


def _segment_values(s: Segment) -> tuple[Any, ...]:
    return (_id_text(s.dataset_id), s.segment_id, s.created_by.topic, s.created_by.partition,
            s.created_by.offset, _micros(s.updated_at), s.position)


def _segment(r: dict[str, Any]) -> Segment:
    return Segment(uuid.UUID(r["dataset_id"]), r["segment_id"],
                   LogPosition(r["created_topic"], r["created_partition"], r["created_offset"]),
                   _datetime(r["updated_at"]), r["position"])


def _layer_values(x: Layer) -> tuple[Any, ...]:
    return (_id_text(x.dataset_id), x.segment_id, x.layer_name, x.storage_url, x.size_bytes,
            x.schema_sha256, x.properties, _micros(x.registered_at), x.registered_by.topic,
            x.registered_by.partition, x.registered_by.offset, str(x.event_id), x.num_chunks,
            _layer_table.ranges_text(x.index_ranges), x.properties_schema_sha256, x.properties_batch)


def _layer(r: dict[str, Any]) -> Layer:
    return Layer(
        dataset_id=uuid.UUID(r["dataset_id"]), segment_id=r["segment_id"],
        layer_name=r["layer_name"], storage_url=r["storage_url"], size_bytes=r["size_bytes"],
        schema_sha256=r["schema_sha256"] or "", properties=r["properties"] or b"",
        registered_at=_datetime(r["registered_at"]),
        registered_by=LogPosition(r["registered_topic"], r["registered_partition"],
                                  r["registered_offset"]),
        event_id=uuid.UUID(r["event_id"]),
        num_chunks=r["num_chunks"], index_ranges=_layer_table.ranges_from_text(r["index_ranges"]),
        properties_schema_sha256=r["properties_schema_sha256"] or "",
        properties_batch=r["properties_batch"] or b"",
    )


def _closed_layer(dataset_id: uuid.UUID, row: dict[str, Any]) -> Layer:
    """A row of ``layer_table.HISTORY_COLUMNS`` as the ``Layer`` it was."""
    digest = row["schema_sha256"]
    return Layer(
        dataset_id=dataset_id, segment_id=row["segment_id"], layer_name=row["layer_name"],
        storage_url=row["storage_url"], size_bytes=row["size_bytes"],
        schema_sha256=digest.hex() if digest else "",
        properties=row["properties"], registered_at=_datetime(row["registered_at"]),
        registered_by=LogPosition(row["registered_topic"], row["registered_partition"],
                                  row["registered_offset"]),
        event_id=uuid.UUID(row["event_id"]), num_chunks=row["num_chunks"],
        index_ranges=tuple(IndexRange(r["timeline"], IndexKind(r["kind"]), r["start"], r["end"])
                           for r in row["index_ranges"]),
        properties_schema_sha256=row["properties_schema_sha256"], properties_batch=row["properties_batch"])


def _table_values(t: Table) -> tuple[Any, ...]:
    return (str(t.id), t.name, _micros(t.created_at), _micros(t.updated_at), t.arrow_schema, t.storage_url,
            t.lance_version, int(t.deleted), t.revision, t.default_blueprint)


def _table(r: dict[str, Any]) -> Table:
    return Table(uuid.UUID(r["id"]), r["name"], _datetime(r["created_at"]), _datetime(r["updated_at"]),
                 r["arrow_schema"], storage_url=r["storage_url"], lance_version=r["lance_version"],
                 deleted=bool(r["deleted"]), revision=r["revision"],
                 default_blueprint=r["default_blueprint"])


def _outcome(r: dict[str, Any]) -> Outcome:
    return Outcome(uuid.UUID(r["event_id"]), LogPosition(r["topic"], r["partition"], r["offset"]),
                   Status(r["status"]), r["reason"])


def _outcome_values(o: Outcome) -> tuple[Any, ...]:
    return (str(o.event_id), o.position.topic, o.position.partition, o.position.offset, str(o.status),
            o.reason)


def _change_values(c: Change, committed_at: int) -> tuple[Any, ...]:
    return (c.position.topic, c.position.partition, c.position.offset, c.seq, str(c.kind),
            str(c.entry_id) if c.entry_id else None, c.entry_name, c.segment_id, c.layer_name, c.detail,
            committed_at)


def _change(r: dict[str, Any]) -> Change:
    return Change(LogPosition(r["topic"], r["partition"], r["offset"]), r["seq"], ChangeKind(r["kind"]),
                  uuid.UUID(r["entry_id"]) if r["entry_id"] else None, r["entry_name"], r["segment_id"],
                  r["layer_name"], r["detail"], _datetime(r["committed_at"]))


def _rejection_values(r: Rejection) -> tuple[Any, ...]:
    return (r.position.topic, r.position.partition, r.position.offset, r.raw, r.reason,
            str(r.event_id) if r.event_id else None)


_HISTORY_VALUES: dict[Versioned, Callable[[Any], tuple[Any, ...]]] = {
    Versioned.SEGMENT: _segment_values, Versioned.ASSET_SCOPE: _scope_values, Versioned.TABLE: _table_values,
    Versioned.TAG: _tag_values}
"""The ``*_history`` values of the versions kept whole (datasets: ``_dataset_history_values``)."""
