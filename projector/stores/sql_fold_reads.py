"""The fold's reads of the SQL store: the current catalog as ``projector.fold.FoldReader``
(point lookups by key), and a batch's view, whose lookups of outcomes, segments, layers and schemas
are read ahead in a few bulk queries instead of one query per record.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from events import DefineSchema, RegisterLayer
from projector.fold import FoldReader
from projector.model import (
    AssetScope,
    Dataset,
    Layer,
    LogRecord,
    SearchIndex,
    Segment,
    Table,
    TablePart,
    Tag,
)
from projector.stores import sql_rows
from projector.stores.sql_database import Database

LayerKey = tuple[uuid.UUID, str, str]
"""(dataset id, segment id, layer name)."""
Row = dict[str, Any]
"""A row of a table, by column name."""


class FoldReads:
    """The current catalog on ``database``, as the fold reads it: each method is the one of the
    same name of ``SqlStore``, which says what it answers."""

    def __init__(self, database: Database) -> None:
        self._db = database

    def batch_view(self, records: Sequence[LogRecord]) -> FoldReader:
        event_ids = sorted({str(r.event.event_id) for r in records if r.event is not None})
        decided = {uuid.UUID(row["event_id"]) for row in self._db.query_in(
            "select event_id from outcomes where event_id in ({})", (), event_ids)}
        wanted: dict[uuid.UUID, set[str]] = {}
        digests: set[str] = set()
        for event in (r.event for r in records if r.event is not None):
            command = event.command
            if isinstance(command, RegisterLayer):
                wanted.setdefault(event.entry_id, set()).add(command.segment_id)
                digests.update((command.schema_sha256, command.properties_schema_sha256))
            elif isinstance(command, DefineSchema):
                digests.add(command.sha256)
        digests.discard("")
        known = self.schemas(sorted(digests))
        segments, layers = self._segments_and_layer_rows(wanted)
        covered = {(d, s) for d, ids in wanted.items() for s in ids}
        return BatchView(self, frozenset(map(uuid.UUID, event_ids)), decided, covered, segments, layers,
                         frozenset(digests), known)

    def segments_with_layers(self, wanted: Mapping[uuid.UUID, Iterable[str]]
                             ) -> tuple[dict[tuple[uuid.UUID, str], Segment],
                                        dict[tuple[uuid.UUID, str, str], Layer]]:
        segments, rows = self._segments_and_layer_rows(wanted)
        return segments, {key: sql_rows.layer(row) for key, row in rows.items()}

    def _segments_and_layer_rows(self, wanted: Mapping[uuid.UUID, Iterable[str]]
                                 ) -> tuple[dict[tuple[uuid.UUID, str], Segment], dict[LayerKey, Row]]:
        """``segments_with_layers``, the layers as rows of ``layers``: a batch's view makes a
        ``Layer`` only of those the fold asks for (a replacement, one of its segment's layers)."""
        segments: dict[tuple[uuid.UUID, str], Segment] = {}
        layers: dict[LayerKey, Row] = {}
        for dataset_id, segment_ids in wanted.items():
            ids = sorted(segment_ids)
            for row in self._db.query_in("select * from segments where dataset_id = ? and segment_id in ({})",
                                         (str(dataset_id),), ids):
                segment = sql_rows.segment(row)
                segments[(segment.dataset_id, segment.segment_id)] = segment
            for row in self._db.query_in("select * from layers where dataset_id = ? and segment_id in ({})",
                                         (str(dataset_id),), ids):
                layers[(dataset_id, row["segment_id"], row["layer_name"])] = row
        return segments, layers

    def dataset(self, dataset_id: uuid.UUID) -> Dataset | None:
        rows = self._db.query("select * from datasets where id = ?", (str(dataset_id),))
        return sql_rows.dataset(rows[0]) if rows else None

    def dataset_by_name(self, name: str) -> Dataset | None:
        rows = self._db.query("select * from datasets where name = ? and deleted = 0", (name,))
        return sql_rows.dataset(rows[0]) if rows else None

    def segment(self, dataset_id: uuid.UUID, segment_id: str) -> Segment | None:
        rows = self._db.query("select * from segments where dataset_id = ? and segment_id = ?",
                              (str(dataset_id), segment_id))
        return sql_rows.segment(rows[0]) if rows else None

    def layer(self, dataset_id: uuid.UUID, segment_id: str, layer_name: str) -> Layer | None:
        rows = self._db.query(
            "select * from layers where dataset_id = ? and segment_id = ? and layer_name = ?",
            (str(dataset_id), segment_id, layer_name))
        return sql_rows.layer(rows[0]) if rows else None

    def matching_layers(self, dataset_id: uuid.UUID, segment_ids: frozenset[str],
                        layer_names: frozenset[str]) -> list[Layer]:
        wanted = sorted(layer_names)
        sql = "select * from layers where dataset_id = ?"
        if wanted:
            sql += f" and layer_name in ({', '.join('?' * len(wanted))})"
        fixed = (str(dataset_id), *wanted)
        if not segment_ids:
            return [sql_rows.layer(row) for row in self._db.query(sql, fixed)]
        return [sql_rows.layer(row) for row in self._db.query_in(sql + " and segment_id in ({})", fixed,
                                                                 sorted(segment_ids))]

    def asset_scope(self, dataset_id: uuid.UUID, segment_id: str) -> AssetScope | None:
        rows = self._db.query("select * from asset_scopes where dataset_id = ? and segment_id = ?",
                              (str(dataset_id), segment_id))
        return sql_rows.asset_scope(rows[0]) if rows else None

    def tag(self, dataset_id: uuid.UUID, name: str) -> Tag | None:
        rows = self._db.query("select * from tags where dataset_id = ? and name = ?", (str(dataset_id), name))
        return sql_rows.tag(rows[0]) if rows else None

    def search_index(self, dataset_id: uuid.UUID, entity_path: str, component: str) -> SearchIndex | None:
        rows = self._db.query("select * from search_indexes where dataset_id = ? and entity_path = ? "
                              "and component = ?", (str(dataset_id), entity_path, component))
        return sql_rows.search_index(rows[0]) if rows else None

    def search_indexes(self, dataset_id: uuid.UUID) -> list[SearchIndex]:
        return [sql_rows.search_index(r) for r in self._db.query(
            "select * from search_indexes where dataset_id = ? order by entity_path, component",
            (str(dataset_id),))]

    def schema(self, digest: str) -> bytes | None:
        rows = self._db.query("select arrow_schema from schemas where digest = ?", (digest,))
        return rows[0]["arrow_schema"] if rows else None

    def schemas(self, digests: Sequence[str]) -> dict[str, bytes]:
        return {row["digest"]: row["arrow_schema"] for row in self._db.query_in(
            "select digest, arrow_schema from schemas where digest in ({})", (), list(digests))}

    def has_outcome(self, event_id: uuid.UUID) -> bool:
        return bool(self._db.query("select 1 from outcomes where event_id = ?", (str(event_id),)))

    def table(self, table_id: uuid.UUID) -> Table | None:
        rows = self._db.query("select * from tables where id = ?", (str(table_id),))
        return sql_rows.table(rows[0]) if rows else None

    def table_by_name(self, name: str) -> Table | None:
        rows = self._db.query("select * from tables where name = ? and deleted = 0", (name,))
        return sql_rows.table(rows[0]) if rows else None

    def table_parts(self, table_id: uuid.UUID, write_id: str) -> list[TablePart]:
        rows = self._db.query("select * from table_parts where table_id = ? and write_id = ? order by part",
                              (str(table_id), write_id))
        return [sql_rows.table_part(r) for r in rows]


class BatchView:
    """The store as the fold sees it for one batch, with its point lookups read ahead; what was
    not read ahead is looked up in ``reads``."""

    def __init__(self, reads: FoldReads, event_ids: frozenset[uuid.UUID], decided: set[uuid.UUID],
                 covered: set[tuple[uuid.UUID, str]], segments: dict[tuple[uuid.UUID, str], Segment],
                 layer_rows: dict[LayerKey, Row], digests: frozenset[str], schemas: dict[str, bytes]) -> None:
        self._reads = reads
        self._digests = digests
        self._schemas = schemas
        self._event_ids = event_ids
        self._decided = decided
        self._covered = covered
        self._segments = segments
        self._layer_rows = layer_rows
        self._layers: dict[LayerKey, Layer] = {}
        self.dataset = reads.dataset
        self.dataset_by_name = reads.dataset_by_name
        self.matching_layers = reads.matching_layers
        self.asset_scope = reads.asset_scope
        self.table = reads.table
        self.table_by_name = reads.table_by_name
        self.table_parts = reads.table_parts
        self.tag = reads.tag
        self.search_index = reads.search_index
        self.search_indexes = reads.search_indexes

    def schema(self, digest: str) -> bytes | None:
        if digest in self._digests:
            return self._schemas.get(digest)
        return self._reads.schema(digest)

    def segment(self, dataset_id: uuid.UUID, segment_id: str) -> Segment | None:
        if (dataset_id, segment_id) in self._covered:
            return self._segments.get((dataset_id, segment_id))
        return self._reads.segment(dataset_id, segment_id)

    def layer(self, dataset_id: uuid.UUID, segment_id: str, layer_name: str) -> Layer | None:
        if (dataset_id, segment_id) not in self._covered:
            return self._reads.layer(dataset_id, segment_id, layer_name)
        key = (dataset_id, segment_id, layer_name)
        layer = self._layers.get(key)
        if layer is None and key in self._layer_rows:
            layer = self._layers[key] = sql_rows.layer(self._layer_rows[key])
        return layer

    def has_outcome(self, event_id: uuid.UUID) -> bool:
        if event_id in self._event_ids:
            return event_id in self._decided
        return self._reads.has_outcome(event_id)
