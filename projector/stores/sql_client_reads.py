"""The clients' reads of the SQL store, beyond the fold's lookups (``projector.stores.sql_fold_reads``):
what ``projector.ports.ProjectionReader`` adds (listings of datasets, segments, layers, tags, asset
scopes and tables, the layer table as Arrow, outcomes, rejections and the change feed), all of the
current catalog.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from projector import layer_table
from projector.model import (
    AssetScope,
    Change,
    Dataset,
    Layer,
    LogPosition,
    Outcome,
    Rejection,
    Segment,
    Table,
    Tag,
)
from projector.stores import sql_rows, sql_tables
from projector.stores.sql_database import Database


class ClientReads:
    """The current catalog on ``database``, as clients read it: each method is the one of the
    same name of ``SqlStore``, which says what it answers."""

    def __init__(self, database: Database) -> None:
        self._db = database

    def outcome(self, event_id: uuid.UUID) -> Outcome | None:
        rows = self._db.query("select * from outcomes where event_id = ?", (str(event_id),))
        return sql_rows.outcome(rows[0]) if rows else None

    def outcomes(self, event_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, Outcome]:
        rows = self._db.query_in("select * from outcomes where event_id in ({})", (),
                                 sorted({str(e) for e in event_ids}))
        return {uuid.UUID(row["event_id"]): sql_rows.outcome(row) for row in rows}

    def outcome_at(self, position: LogPosition) -> Outcome | None:
        rows = self._db.query('select * from outcomes where topic = ? and partition = ? and "offset" = ?',
                              (position.topic, position.partition, position.offset))
        return sql_rows.outcome(rows[0]) if rows else None

    def datasets(self) -> list[Dataset]:
        return [sql_rows.dataset(r) for r in
                self._db.query("select * from datasets where deleted = 0 order by created_at, id")]

    def segments(self, dataset_id: uuid.UUID) -> list[Segment]:
        rows = self._db.query(
            "select * from segments where dataset_id = ? "
            "order by created_topic, created_partition, created_offset", (str(dataset_id),))
        return [sql_rows.segment(r) for r in rows]

    def layers(self, dataset_id: uuid.UUID) -> list[Layer]:
        rows = self._db.query(
            "select l.* from layers l join segments s using (dataset_id, segment_id) "
            "where l.dataset_id = ? order by s.created_topic, s.created_partition, "
            "s.created_offset, l.registered_topic, l.registered_partition, l.registered_offset",
            (str(dataset_id),))
        return [sql_rows.layer(r) for r in rows]

    def layer_table(self, dataset_id: uuid.UUID) -> pa.Table:
        blobs = self._db.read_blobs("select layers from layer_chunks where dataset_id = ? order by chunk",
                                    (str(dataset_id),))
        return layer_table.from_ipc(blobs)

    def segment_layer_table(self, dataset_id: uuid.UUID, segment_id: str) -> pa.Table:
        found = self._db.query("select position from segments where dataset_id = ? and segment_id = ?",
                               (str(dataset_id), segment_id))
        if not found:
            return layer_table.LAYER_COLUMNS.empty_table()
        blobs = self._db.read_blobs("select layers from layer_chunks where dataset_id = ? and chunk = ?",
                                    (str(dataset_id), found[0]["position"] // layer_table.CHUNK_SEGMENTS))
        chunk = layer_table.from_ipc(blobs)
        return chunk.filter(pc.equal(chunk["segment_id"], segment_id))

    def asset_scopes(self, dataset_id: uuid.UUID) -> list[AssetScope]:
        return [sql_rows.asset_scope(r) for r in self._db.query(
            "select * from asset_scopes where dataset_id = ? order by segment_id", (str(dataset_id),))]

    def tags(self, dataset_id: uuid.UUID) -> list[Tag]:
        rows = self._db.query('select * from tags where dataset_id = ? order by "offset", name',
                              (str(dataset_id),))
        return [sql_rows.tag(r) for r in rows]

    def tables(self) -> list[Table]:
        return [sql_rows.table(r) for r in
                self._db.query("select * from tables where deleted = 0 order by created_at, id")]

    def table_data(self, table: Table) -> pa.Table:
        return sql_tables.current_rows(self._db, table)

    def rejections(self) -> list[Rejection]:
        rows = self._db.query('select * from rejections order by topic, partition, "offset"')
        return [sql_rows.rejection(r) for r in rows]

    def changes(self, after: tuple[int, int] = (-1, 0), *, entry_id: uuid.UUID | None = None,
                limit: int = 1000) -> list[Change]:
        offset, seq = after
        sql = 'select * from feed where ("offset" > ? or ("offset" = ? and seq > ?))'
        params: tuple[Any, ...] = (offset, offset, seq)
        if entry_id is not None:
            sql += " and entry_id = ?"
            params += (str(entry_id),)
        return [sql_rows.change(r) for r in self._db.query(sql + ' order by "offset", seq limit ?',
                                                           (*params, limit))]
