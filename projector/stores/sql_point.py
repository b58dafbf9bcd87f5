"""The SQL store's catalog as of a point of the log (``PointReader``), read from the store's
history (``projector.stores.sql_history``) and its current catalog, through two named ports: the
store's client reads (``Present``) and read-only queries of its database
(``projector.stores.sql_database.Queries``).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any, Protocol

import pyarrow as pa
import pyarrow.compute as pc

from events import CATALOG_TOPIC
from projector import derived, layer_table
from projector.model import (
    AssetScope,
    Change,
    Dataset,
    Layer,
    LogPosition,
    Outcome,
    Rejection,
    SearchIndex,
    Segment,
    Table,
    Tag,
)
from projector.ports import ProjectionReader
from projector.stores import sql_history, sql_rows, sql_tables
from projector.stores.sql_database import Queries


class Present(ProjectionReader, Protocol):
    """The current catalog a point reader starts from: the clients' port, and the lookup of a
    schema by its digest."""

    def schema(self, digest: str) -> bytes | None: ...


class PointReader:
    """The catalog as of the log prefix ``[0, offset)``, read from the store's history
    (``projector.stores.sql_history``): the entries, segments, layers and asset scopes the store
    held after folding exactly those records, equal to what a store rebuilt from that prefix
    answers now. Read-only, as every client's reader.

    ``store`` gives the current catalog, ``queries`` reads its history."""

    def __init__(self, store: Present, queries: Queries, offset: int) -> None:
        self._store = store
        self._queries = queries
        self.offset = offset
        self.location = store.location

    def __repr__(self) -> str:
        return f"PointReader({self.location!r}, offset={self.offset})"

    def _versions(self, table: str, condition: str, params: tuple[Any, ...],
                  order: str) -> list[dict[str, Any]]:
        return self._queries.query(f"select * from {table} where {condition} and {sql_history.visible()} "
                                   f"order by {order}", (*params, self.offset, self.offset))

    def _dataset(self, row: dict[str, Any]) -> Dataset:
        """The dataset a ``dataset_history`` row stands for at the point (``projector.derived``)."""
        digest = row["schema_digest"]
        version = sql_rows.dataset_version(row, self._store.schema(digest) or b"" if digest else b"")
        current, history = self._store.layer_table(version.id), self._history(version.id, row["valid_from"])
        registered = self._registered(current, history, row["valid_from"])["registered_at"]
        created = self._queries.query(
            "select max(position) as last from segment_history where dataset_id = ? and valid_from < ?",
            (row["id"], self.offset))[0]["last"]
        layers = layer_table.at_offset(current, self._at_point(history), self.offset)
        return derived.dataset_as_of(version, layers, pc.max(registered).as_py(),
                                     0 if created is None else created + 1)

    def _history(self, dataset_id: uuid.UUID, since: int) -> pa.Table:
        """The dataset's closed layers (``layer_table.HISTORY_COLUMNS``) of the ``layer_history``
        chunks from the one holding offset ``since`` on: every layer closed from ``since`` on."""
        blobs = self._queries.read_blobs(
            "select layers from layer_history where dataset_id = ? and chunk >= ? order by chunk",
            (str(dataset_id), since // sql_history.HISTORY_CHUNK_OFFSETS))
        return layer_table.from_ipc(blobs, layer_table.HISTORY_COLUMNS)

    def _at_point(self, history: pa.Table) -> pa.Table:
        """The rows of ``_history`` (read from the point or earlier) that were layers at the point."""
        return history.filter(pc.and_(pc.less(history["registered_offset"], self.offset),
                                      pc.greater_equal(history["valid_to"], self.offset)))

    def _registered(self, current: pa.Table, history: pa.Table, since: int) -> pa.Table:
        """``segment_id``, ``registered_offset`` and ``registered_at`` of every layer registered
        into the dataset from offset ``since`` to the point, replaced or removed since or not:
        ``current`` is its layer table now, ``history`` its ``_history`` from ``since``."""
        columns = ["segment_id", "registered_offset", "registered_at"]
        layers = pa.concat_tables([current.select(columns), history.select(columns)])
        offsets = layers["registered_offset"]
        return layers.filter(pc.and_(pc.greater_equal(offsets, since), pc.less(offsets, self.offset)))

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
        """The ``segment_history`` rows at the point, each ``updated_at`` the later of its own
        and that of its registrations since (``projector.derived``)."""
        rows = self._versions("segment_history", "dataset_id = ?", (str(dataset_id),),
                              "created_topic, created_partition, created_offset")
        if not rows:
            return []
        since = [r["valid_from"] for r in rows]
        first = min(since)
        found = self._registered(self._store.layer_table(dataset_id), self._history(dataset_id, first), first)
        found = found.join(pa.table({"segment_id": [r["segment_id"] for r in rows], "valid_from": since}),
                           "segment_id")
        found = found.filter(pc.greater_equal(found["registered_offset"], found["valid_from"]))
        newest = found.group_by("segment_id").aggregate([("registered_at", "max")])
        at = dict(zip(newest["segment_id"].to_pylist(), newest["registered_at_max"].to_pylist(), strict=True))
        return [replace(s, updated_at=derived.latest(s.updated_at, at.get(s.segment_id)))
                for s in map(sql_rows.segment, rows)]

    def _closed_layers(self, dataset_id: uuid.UUID) -> pa.Table:
        """The dataset's replaced and removed layers that were its layers at the point."""
        return self._at_point(self._history(dataset_id, self.offset))

    def layer_table(self, dataset_id: uuid.UUID) -> pa.Table:
        return self._layer_table(dataset_id, self._closed_layers(dataset_id))

    def _layer_table(self, dataset_id: uuid.UUID, closed: pa.Table) -> pa.Table:
        return layer_table.at_offset(self._store.layer_table(dataset_id), closed, self.offset)

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
        return [now.get(key) or sql_rows.closed_layer(dataset_id, closed[key])
                for key in zip(*(keys[name].to_pylist() for name in keys.column_names), strict=True)]

    def tag(self, dataset_id: uuid.UUID, name: str) -> Tag | None:
        rows = self._versions("tag_history", "dataset_id = ? and name = ?", (str(dataset_id), name), "name")
        return sql_rows.tag(rows[0]) if rows else None

    def tags(self, dataset_id: uuid.UUID) -> list[Tag]:
        return [sql_rows.tag(r) for r in self._versions("tag_history", "dataset_id = ?", (str(dataset_id),),
                                                        '"offset", name')]

    def search_indexes(self, dataset_id: uuid.UUID) -> list[SearchIndex]:
        """None: search answers for the catalog as it is, never as of a point."""
        return []

    def asset_scope(self, dataset_id: uuid.UUID, segment_id: str) -> AssetScope | None:
        rows = self._versions("asset_scope_history", "dataset_id = ? and segment_id = ?",
                              (str(dataset_id), segment_id), "segment_id")
        return sql_rows.asset_scope(rows[0]) if rows else None

    def asset_scopes(self, dataset_id: uuid.UUID) -> list[AssetScope]:
        return [sql_rows.asset_scope(r) for r in self._versions("asset_scope_history", "dataset_id = ?",
                                                                (str(dataset_id),), "segment_id")]

    def schema(self, digest: str) -> bytes | None:
        return self._store.schema(digest)

    def schemas(self, digests: Sequence[str]) -> dict[str, bytes]:
        return self._store.schemas(digests)

    def table(self, table_id: uuid.UUID) -> Table | None:
        rows = self._versions("table_history", "id = ?", (str(table_id),), "id")
        return sql_rows.table(rows[0]) if rows else None

    def table_by_name(self, name: str) -> Table | None:
        rows = self._versions("table_history", "name = ? and deleted = 0", (name,), "id")
        return sql_rows.table(rows[0]) if rows else None

    def tables(self) -> list[Table]:
        return [sql_rows.table(r)
                for r in self._versions("table_history", "deleted = 0", (), "created_at, id")]

    def table_data(self, table: Table) -> pa.Table:
        now = self._store.table(table.id)
        if now is not None and not now.deleted and now.revision == table.revision:
            return self._store.table_data(table)  # not written since the point
        return sql_tables.rows_as_of(self._queries, table, self.offset)

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
        return PointReader(self._store, self._queries, offset)

    def close(self) -> None:
        """Nothing to release: the store is its owner's."""
