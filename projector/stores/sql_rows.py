"""The projection's values as the SQL store's rows, and back: ``*_values`` give a row in the
column order of ``projector.stores.sql_schema.TABLES``, the others read a row (a dict by column
name) into the value it holds.

Times are stored as integer microseconds since the Unix epoch (UTC), so they round-trip exactly;
ids as text, Arrow data as IPC bytes.
"""

from __future__ import annotations

import functools
import json
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from events import (
    AssetMode,
    CreateSearchIndex,
    DistanceMetric,
    IndexKind,
    IndexRange,
    MaintainSearchIndexes,
    SearchIndexKind,
    TableWriteMode,
)
from projector import layer_table, schemas
from projector.model import (
    AssetScope,
    Change,
    ChangeKind,
    Dataset,
    DatasetKind,
    Layer,
    LogPosition,
    Outcome,
    Rejection,
    RunWrite,
    SchemaRef,
    SearchIndex,
    Segment,
    Status,
    Table,
    TablePart,
    Tag,
    Versioned,
)

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@functools.lru_cache(maxsize=4096)
def id_text(dataset_id: uuid.UUID) -> str:
    """A dataset id as stored: converted once, not once per row of a batch."""
    return str(dataset_id)


@functools.lru_cache(maxsize=4096)
def entry_id(text: str) -> uuid.UUID:
    """A dataset's or table's id as read: parsed once, not once per row (a few entries have most
    of the rows; an event id is parsed as it comes)."""
    return uuid.UUID(text)


def key_text(part: Any) -> Any:
    """A part of a ``Version.key`` as stored: an id as text, anything else as it is."""
    return id_text(part) if isinstance(part, uuid.UUID) else part


def micros(value: datetime) -> int:
    """``value`` as stored: microseconds since the Unix epoch."""
    return (value - _EPOCH) // timedelta(microseconds=1)


def from_micros(value: int) -> datetime:
    """A stored time (microseconds since the Unix epoch) as a UTC datetime."""
    return _EPOCH + timedelta(microseconds=value)


def dataset_values(d: Dataset) -> tuple[Any, ...]:
    return (str(d.id), d.name, micros(d.created_at), micros(d.updated_at), int(d.deleted), d.schema,
            json.dumps([[r.digest, r.layers] for r in d.schema_refs]), d.default_blueprint,
            d.segments_created, str(d.kind), d.default_segment_table_blueprint, d.schemaless_layers)


def dataset(r: dict[str, Any]) -> Dataset:
    return Dataset(entry_id(r["id"]), r["name"], from_micros(r["created_at"]),
                   from_micros(r["updated_at"]), deleted=bool(r["deleted"]), schema=r["schema"] or b"",
                   schema_refs=tuple(SchemaRef(d, n) for d, n in json.loads(r["schema_refs"])),
                   default_blueprint=r["default_blueprint"], segments_created=r["segments_created"],
                   kind=DatasetKind(r["kind"]),
                   default_segment_table_blueprint=r["default_segment_table_blueprint"],
                   schemaless_layers=r["schemaless_layers"])


def dataset_history_values(d: Dataset, merged_schemas: dict[bytes, str]) -> tuple[Any, ...]:
    """A dataset version as ``dataset_history`` keeps it: its merged schema by digest, the
    schema itself added to ``merged_schemas`` (schema: digest)."""
    digest = ""
    if d.schema:
        digest = merged_schemas.get(d.schema) or merged_schemas.setdefault(d.schema, schemas.digest(d.schema))
    return (str(d.id), d.name, micros(d.created_at), micros(d.updated_at), int(d.deleted), digest,
            json.dumps([r.digest for r in d.schema_refs]), d.default_blueprint, str(d.kind),
            d.default_segment_table_blueprint)


def dataset_version(r: dict[str, Any], schema: bytes) -> Dataset:
    """A ``dataset_history`` row, its merged ``schema`` looked up: the dataset with its layer
    counts at zero, which ``projector.derived.dataset_as_of`` puts back."""
    return Dataset(entry_id(r["id"]), r["name"], from_micros(r["created_at"]), from_micros(r["updated_at"]),
                   deleted=bool(r["deleted"]), schema=schema,
                   schema_refs=tuple(SchemaRef(d, 0) for d in json.loads(r["schema_digests"])),
                   default_blueprint=r["default_blueprint"], kind=DatasetKind(r["kind"]),
                   default_segment_table_blueprint=r["default_segment_table_blueprint"])


def scope_values(a: AssetScope) -> tuple[Any, ...]:
    return (str(a.dataset_id), a.segment_id, str(a.mode), json.dumps(a.segments), a.revision)


def asset_scope(r: dict[str, Any]) -> AssetScope:
    return AssetScope(entry_id(r["dataset_id"]), r["segment_id"], AssetMode(r["mode"]),
                      tuple(json.loads(r["segments"])), r["revision"])


def tag_values(t: Tag) -> tuple[Any, ...]:
    return (str(t.dataset_id), t.name, t.offset, micros(t.created_at))


def tag(r: dict[str, Any]) -> Tag:
    return Tag(entry_id(r["dataset_id"]), r["name"], r["offset"], from_micros(r["created_at"]))


def search_index_values(i: SearchIndex) -> tuple[Any, ...]:
    """An index as stored: its definition and last maintenance as JSON objects of their fields."""
    maintenance = "" if i.maintenance is None else json.dumps({
        **vars(i.maintenance), "cleanup_before": None if i.maintenance.cleanup_before is None
        else micros(i.maintenance.cleanup_before)})
    return (str(i.dataset_id), i.entity_path, i.component, json.dumps(vars(i.definition)), i.created_offset,
            micros(i.created_at), maintenance, i.maintained_offset)


def search_index(r: dict[str, Any]) -> SearchIndex:
    definition = json.loads(r["definition"])
    definition.update(kind=SearchIndexKind(definition["kind"]),
                      distance_metric=DistanceMetric(definition["distance_metric"]))
    maintenance = None
    if r["maintenance"]:
        asked = json.loads(r["maintenance"])
        if asked["cleanup_before"] is not None:
            asked["cleanup_before"] = from_micros(asked["cleanup_before"])
        maintenance = MaintainSearchIndexes(**asked)
    return SearchIndex(entry_id(r["dataset_id"]), r["entity_path"], r["component"],
                       CreateSearchIndex(**definition), r["created_offset"], from_micros(r["created_at"]),
                       maintenance, r["maintained_offset"])


def segment_values(s: Segment) -> tuple[Any, ...]:
    return (id_text(s.dataset_id), s.segment_id, s.created_by.topic, s.created_by.partition,
            s.created_by.offset, micros(s.updated_at), s.position)


def segment(r: dict[str, Any]) -> Segment:
    return Segment(entry_id(r["dataset_id"]), r["segment_id"],
                   LogPosition(r["created_topic"], r["created_partition"], r["created_offset"]),
                   from_micros(r["updated_at"]), r["position"])


def layer_values(x: Layer) -> tuple[Any, ...]:
    return (id_text(x.dataset_id), x.segment_id, x.layer_name, x.storage_url, x.size_bytes,
            x.schema_sha256, x.properties, micros(x.registered_at), x.registered_by.topic,
            x.registered_by.partition, x.registered_by.offset, str(x.event_id), x.num_chunks,
            layer_table.ranges_text(x.index_ranges), x.properties_schema_sha256, x.properties_batch)


def run_layer_values(dataset_text: str, topic: str, partition: int, write: RunWrite) -> tuple[Any, ...]:
    """The ``layer_values`` of the layer a run's write made (``projector.layer_runs``)."""
    c = write.command
    return (dataset_text, c.segment_id, c.layer_name, c.storage_url, c.size_bytes, c.schema_sha256, b"",
            micros(write.registered_at), topic, partition, write.offset, str(write.event_id), c.num_chunks,
            layer_table.ranges_text(c.index_ranges), c.properties_schema_sha256, c.properties_batch)


def layer(r: dict[str, Any]) -> Layer:
    return Layer(
        dataset_id=entry_id(r["dataset_id"]), segment_id=r["segment_id"],
        layer_name=r["layer_name"], storage_url=r["storage_url"], size_bytes=r["size_bytes"],
        schema_sha256=r["schema_sha256"] or "", properties=r["properties"] or b"",
        registered_at=from_micros(r["registered_at"]),
        registered_by=LogPosition(r["registered_topic"], r["registered_partition"],
                                  r["registered_offset"]),
        event_id=uuid.UUID(r["event_id"]),
        num_chunks=r["num_chunks"], index_ranges=layer_table.ranges_from_text(r["index_ranges"]),
        properties_schema_sha256=r["properties_schema_sha256"] or "",
        properties_batch=r["properties_batch"] or b"",
    )


def closed_layer_values(x: Layer, position: int, valid_to: int) -> tuple[Any, ...]:
    """A layer closed at ``valid_to`` as a row of ``layer_table.HISTORY_COLUMNS``, its segment at
    ``position``."""
    return (x.segment_id, x.layer_name, x.storage_url, x.size_bytes, micros(x.registered_at),
            x.schema_sha256, x.properties, x.num_chunks, layer_table.ranges_text(x.index_ranges),
            x.properties_schema_sha256, x.properties_batch, x.registered_by.offset, position, valid_to,
            str(x.event_id), x.registered_by.topic, x.registered_by.partition)


def closed_layer(dataset_id: uuid.UUID, row: dict[str, Any]) -> Layer:
    """A row of ``layer_table.HISTORY_COLUMNS`` as the ``Layer`` it was."""
    digest = row["schema_sha256"]
    return Layer(
        dataset_id=dataset_id, segment_id=row["segment_id"], layer_name=row["layer_name"],
        storage_url=row["storage_url"], size_bytes=row["size_bytes"],
        schema_sha256=digest.hex() if digest else "",
        properties=row["properties"], registered_at=from_micros(row["registered_at"]),
        registered_by=LogPosition(row["registered_topic"], row["registered_partition"],
                                  row["registered_offset"]),
        event_id=uuid.UUID(row["event_id"]), num_chunks=row["num_chunks"],
        index_ranges=tuple(IndexRange(r["timeline"], IndexKind(r["kind"]), r["start"], r["end"])
                           for r in row["index_ranges"]),
        properties_schema_sha256=row["properties_schema_sha256"], properties_batch=row["properties_batch"])


def table_values(t: Table) -> tuple[Any, ...]:
    return (str(t.id), t.name, micros(t.created_at), micros(t.updated_at), t.arrow_schema, t.storage_url,
            t.lance_version, int(t.deleted), t.revision, t.default_blueprint)


def table(r: dict[str, Any]) -> Table:
    return Table(entry_id(r["id"]), r["name"], from_micros(r["created_at"]), from_micros(r["updated_at"]),
                 r["arrow_schema"], storage_url=r["storage_url"], lance_version=r["lance_version"],
                 deleted=bool(r["deleted"]), revision=r["revision"],
                 default_blueprint=r["default_blueprint"])


def table_part_values(p: TablePart) -> tuple[Any, ...]:
    return (str(p.table_id), p.write_id, p.part, p.parts, str(p.mode), p.rows)


def table_part(r: dict[str, Any]) -> TablePart:
    return TablePart(entry_id(r["table_id"]), r["write_id"], r["part"], r["parts"],
                     TableWriteMode(r["mode"]), r["rows"])


def outcome_values(o: Outcome) -> tuple[Any, ...]:
    return (str(o.event_id), o.position.topic, o.position.partition, o.position.offset, str(o.status),
            o.reason)


def outcome(r: dict[str, Any]) -> Outcome:
    return Outcome(uuid.UUID(r["event_id"]), LogPosition(r["topic"], r["partition"], r["offset"]),
                   Status(r["status"]), r["reason"])


def change_values(c: Change, committed_at: int) -> tuple[Any, ...]:
    return (c.position.topic, c.position.partition, c.position.offset, c.seq, str(c.kind),
            str(c.entry_id) if c.entry_id else None, c.entry_name, c.segment_id, c.layer_name, c.detail,
            committed_at)


def change(r: dict[str, Any]) -> Change:
    return Change(LogPosition(r["topic"], r["partition"], r["offset"]), r["seq"], ChangeKind(r["kind"]),
                  entry_id(r["entry_id"]) if r["entry_id"] else None, r["entry_name"], r["segment_id"],
                  r["layer_name"], r["detail"], from_micros(r["committed_at"]))


def rejection_values(r: Rejection) -> tuple[Any, ...]:
    return (r.position.topic, r.position.partition, r.position.offset, r.raw, r.reason,
            str(r.event_id) if r.event_id else None)


def rejection(r: dict[str, Any]) -> Rejection:
    return Rejection(LogPosition(r["topic"], r["partition"], r["offset"]), r["raw"],
                     r["reason"], uuid.UUID(r["event_id"]) if r["event_id"] else None)


HISTORY_VALUES: dict[Versioned, Callable[[Any], tuple[Any, ...]]] = {
    Versioned.SEGMENT: segment_values, Versioned.ASSET_SCOPE: scope_values, Versioned.TABLE: table_values,
    Versioned.TAG: tag_values}
"""The ``*_history`` values of the versions kept whole (datasets: ``dataset_history_values``)."""
