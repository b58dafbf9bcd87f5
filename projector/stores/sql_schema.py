"""The projection store's tables: every table's columns and primary key (``TABLES``), the
secondary indexes, the store format they make (``FORMAT_VERSION``), and the statements that follow
from them (quoted column names, one row's insert and upsert). Both backends create their tables
from here, and snapshots copy every table listed here.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable

FORMAT_VERSION = 14
"""Bumped whenever the tables change; an older store is rebuilt with ``strata replay``."""

Columns = dict[str, type]
"""A table's column names and their Python types (``str``, ``int``, ``bytes``), in order."""

_DATASET: Columns = {
    "id": str, "name": str, "created_at": int, "updated_at": int, "deleted": int, "schema": bytes,
    "schema_refs": str, "default_blueprint": str, "segments_created": int, "kind": str,
    "default_segment_table_blueprint": str, "schemaless_layers": int}
_SEGMENT: Columns = {"dataset_id": str, "segment_id": str, "created_topic": str, "created_partition": int,
                     "created_offset": int, "updated_at": int, "position": int}
_LAYER: Columns = {
    "dataset_id": str, "segment_id": str, "layer_name": str, "storage_url": str, "size_bytes": int,
    "schema_sha256": str, "properties": bytes, "registered_at": int, "registered_topic": str,
    "registered_partition": int, "registered_offset": int, "event_id": str, "num_chunks": int,
    "index_ranges": str, "properties_schema_sha256": str, "properties_batch": bytes}
_SCOPE: Columns = {"dataset_id": str, "segment_id": str, "mode": str, "segments": str, "revision": int}
_TABLE: Columns = {"id": str, "name": str, "created_at": int, "updated_at": int, "arrow_schema": bytes,
                   "storage_url": str, "lance_version": int, "deleted": int, "revision": int,
                   "default_blueprint": str}
_TAG: Columns = {"dataset_id": str, "name": str, "offset": int, "created_at": int}
_SEARCH_INDEX: Columns = {
    "dataset_id": str, "entity_path": str, "component": str, "definition": str, "created_offset": int,
    "created_at": int, "maintenance": str, "maintained_offset": int}
_SPAN: Columns = {"valid_from": int, "valid_to": int}
_DATASET_VERSION: Columns = {
    "id": str, "name": str, "created_at": int, "updated_at": int, "deleted": int, "schema_digest": str,
    "schema_digests": str, "default_blueprint": str, "kind": str, "default_segment_table_blueprint": str}
"""A dataset's version keeps its merged schema by digest (see ``projector.stores.sql_history``),
and of its layer counts only the digests in order: the counts are the layers' (``projector.derived``)."""

HISTORY_TABLES: dict[str, tuple[Columns, tuple[str, ...]]] = {
    "dataset_history": ({**_DATASET_VERSION, **_SPAN}, ("id", "valid_from")),
    "segment_history": ({**_SEGMENT, **_SPAN}, ("dataset_id", "segment_id", "valid_from")),
    "asset_scope_history": ({**_SCOPE, **_SPAN}, ("dataset_id", "segment_id", "valid_from")),
    "table_history": ({**_TABLE, **_SPAN}, ("id", "valid_from")),
    "tag_history": ({**_TAG, **_SPAN}, ("dataset_id", "name", "valid_from")),
    "layer_history": ({"dataset_id": str, "chunk": int, "layers": bytes}, ("dataset_id", "chunk")),
}
"""The projection's past (``projector.stores.sql_history``): every version of the small rows with
the offsets between which it was the row, and the closed layers in chunks."""

SMALL_ROWS = ("dataset_history", "segment_history", "asset_scope_history", "table_history", "tag_history")
"""Tables of rows a few hundred bytes long, read by their primary key: SQLite keeps them in it
(``WITHOUT ROWID``), without a second copy of the key."""

TABLES: dict[str, tuple[Columns, tuple[str, ...]]] = {
    "datasets": (_DATASET, ("id",)),
    "segments": (_SEGMENT, ("dataset_id", "segment_id")),
    "layers": (_LAYER, ("dataset_id", "segment_id", "layer_name")),
    "asset_scopes": (_SCOPE, ("dataset_id", "segment_id")),
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
    "tables": (_TABLE, ("id",)),
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
    "tags": (_TAG, ("dataset_id", "name")),
    "search_indexes": (_SEARCH_INDEX, ("dataset_id", "entity_path", "component")),
    **HISTORY_TABLES,
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

Index = tuple[str, tuple[str, ...]]
"""A secondary index: its table and its columns."""
FOLD_INDEXES: tuple[Index, ...] = (
    ("datasets", ("name",)), ("segments", ("dataset_id", "position")),
    ("layers", ("dataset_id", "layer_name")), ("tables", ("name",)))
"""The secondary indexes the projector's own reads use."""
CLIENT_INDEXES: tuple[Index, ...] = (
    ("outcomes", ("topic", "partition", "offset")), ("feed", ("offset", "seq")),
    ("feed", ("entry_id", "offset", "seq")))
"""The secondary indexes only clients read by (waits, the change feed): a store loaded from
scratch builds them after its last batch (``SqliteStore(loading=True)``)."""
INDEXES = FOLD_INDEXES + CLIENT_INDEXES
"""Secondary indexes, besides each table's primary key."""


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
