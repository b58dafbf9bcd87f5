"""The changelog topic's records: which key a change touches, and that key's state as a value."""

from __future__ import annotations

import functools
import io
import json
import uuid
from collections.abc import Iterator, Mapping
from datetime import datetime
from importlib import resources
from typing import Any, TypedDict, cast

import fastavro

from events.codec import MAGIC, schema_fingerprint
from projector import Change, ChangeKind, Dataset, Layer, ProjectionReader, Segment, Table

CHANGES_TOPIC = "strata.catalog.changes"
OFFSET_HEADER = "strata.source.offset"
"""Every record's header: the source offset (8 bytes, big-endian) of the change it follows."""

SCHEMA = cast(dict[str, Any], fastavro.parse_schema(json.loads(  # a record schema parses to a dict
    resources.files("events").joinpath("schemas", "catalog_change.v1.avsc").read_text())))
_FINGERPRINT = schema_fingerprint(SCHEMA)



def offset_headers(offset: int) -> list[tuple[str, str | bytes | None]]:
    """The headers of a record that follows the change at source offset ``offset``."""
    return [(OFFSET_HEADER, offset.to_bytes(8, "big"))]


def source_offset(headers: Mapping[str, str | bytes | None]) -> int | None:
    """The source offset in a changelog record's headers; None if they carry none, or one that is
    not 8 bytes (a null value, say): a record strata did not write."""
    value = headers.get(OFFSET_HEADER)
    if not isinstance(value, bytes) or len(value) != 8:
        return None
    return int.from_bytes(value, "big")


Key = tuple[str, ...]
"""("dataset", id), ("segment", dataset id, segment id), ("layer", dataset id, segment id, layer
name), ("table", id) or ("rejection", topic, partition, offset); on the wire, a JSON array."""



class DatasetState(TypedDict):
    id: str
    name: str
    created_at: datetime
    default_blueprint: str | None


class SegmentState(TypedDict):
    dataset_id: str
    segment_id: str
    position: int
    created_offset: int


class IndexRangeState(TypedDict):
    timeline: str
    kind: str
    start: int
    end: int


class LayerState(TypedDict):
    dataset_id: str
    segment_id: str
    layer_name: str
    storage_url: str
    size_bytes: int
    schema_sha256: str
    registered_at: datetime
    registered_offset: int
    event_id: str
    num_chunks: int | None
    index_ranges: list[IndexRangeState]
    properties: bytes
    properties_schema_sha256: str
    properties_batch: bytes


class TableState(TypedDict):
    id: str
    name: str
    created_at: datetime
    updated_at: datetime
    storage_url: str
    lance_version: int | None
    revision: int


class RejectionState(TypedDict):
    reason: str
    entry_id: str | None


State = tuple[str, DatasetState | SegmentState | LayerState | TableState | RejectionState]
"""A value's ``state``, as written: the record's full name and its fields."""


class ChangelogValue(TypedDict):
    """A changelog value as read back. Its state's fields are those of the ``State`` written,
    with ids as ``uuid.UUID`` (fastavro reads the ``uuid`` logical type so)."""

    source_topic: str
    source_partition: int
    source_offset: int
    change: str
    state: tuple[str, dict[str, Any]]


_DATASET_KINDS = {ChangeKind.DATASET_CREATED, ChangeKind.DATASET_RENAMED, ChangeKind.DATASET_DELETED,
                  ChangeKind.DEFAULT_BLUEPRINT_SET}
_TABLE_KINDS = {ChangeKind.TABLE_CREATED, ChangeKind.TABLE_RENAMED, ChangeKind.TABLE_DELETED,
                ChangeKind.TABLE_ROWS_WRITTEN}


@functools.lru_cache(maxsize=4096)
def _id_text(entry_id: uuid.UUID | None) -> str:
    """An entry's id as the changelog writes it: converted once per entry, not once per change."""
    return str(entry_id)


def key_of(change: Change) -> Key | None:
    """The key whose state ``change`` changed. A blueprint is a segment of a hidden dataset; a
    default blueprint is in its dataset's state (``records_of`` skips a table's)."""
    entry = _id_text(change.entry_id)
    if change.kind in _DATASET_KINDS:
        return "dataset", entry
    if change.kind in (ChangeKind.SEGMENT_ADDED, ChangeKind.SEGMENT_REMOVED):
        return "segment", entry, change.segment_id
    if change.kind in (ChangeKind.LAYER_ADDED, ChangeKind.LAYER_REPLACED, ChangeKind.LAYER_REMOVED):
        return "layer", entry, change.segment_id, change.layer_name
    if change.kind in _TABLE_KINDS:
        return "table", entry
    if change.kind is ChangeKind.REJECTED:
        p = change.position
        return "rejection", p.topic, str(p.partition), str(p.offset)
    return None


def records_of(store: ProjectionReader, latest: Mapping[Key, Change]
               ) -> Iterator[tuple[Change, bytes, bytes | None]]:
    """For each key of ``latest`` (with its latest change), in order: that change, and the Kafka
    key and value: the state the store holds now, or None (a tombstone) if the thing is gone.
    The segments and layers are read in bulk."""
    wanted: dict[uuid.UUID, set[str]] = {}
    for key, change in latest.items():
        if key[0] in ("segment", "layer") and change.entry_id is not None:
            wanted.setdefault(change.entry_id, set()).add(key[2])
    segments, layers = store.segments_with_layers(wanted) if wanted else ({}, {})
    for key, change in latest.items():
        if key[0] == "dataset" and change.entry_id is not None and store.dataset(change.entry_id) is None:
            continue  # a table's default blueprint: a table's state does not carry it
        state = _state(store, key, change, segments, layers)
        value = None
        if state is not None:
            out = io.BytesIO()
            out.write(MAGIC)
            out.write(_FINGERPRINT)
            p = change.position
            fastavro.schemaless_writer(out, SCHEMA, {
                "source_topic": p.topic, "source_partition": p.partition, "source_offset": p.offset,
                "change": str(change.kind), "state": state})
            value = out.getvalue()
        yield change, json.dumps(key).encode(), value


def decode_value(value: bytes) -> ChangelogValue:
    """A changelog value as a dict; ``state`` is a (record name, fields) pair. ``ValueError`` for
    bytes that are not one."""
    if value[:2] != MAGIC or value[2:10] != _FINGERPRINT:
        raise ValueError("not a strata changelog value (wrong single-object header)")
    record = fastavro.schemaless_reader(io.BytesIO(value[10:]), SCHEMA, return_record_name=True)
    return cast(ChangelogValue, record)  # what SCHEMA, a record, reads into


def _state(store: ProjectionReader, key: Key, change: Change,
           segments: Mapping[tuple[uuid.UUID, str], Segment],
           layers: Mapping[tuple[uuid.UUID, str, str], Layer]) -> State | None:
    kind = key[0]
    if kind == "rejection":
        return "strata.changelog.RejectionState", {
            "reason": change.detail, "entry_id": str(change.entry_id) if change.entry_id else None}
    entry = change.entry_id
    assert entry is not None, "a change of an entry names it"
    if kind == "dataset":
        dataset = store.dataset(entry)
        return None if dataset is None or dataset.deleted else _dataset_state(dataset)
    if kind == "table":
        table = store.table(entry)
        return None if table is None or table.deleted else _table_state(table)
    if kind == "segment":
        segment = segments.get((entry, key[2]))
        return None if segment is None else _segment_state(segment)
    layer = layers.get((entry, key[2], key[3]))
    return None if layer is None else _layer_state(layer)


def _dataset_state(d: Dataset) -> tuple[str, DatasetState]:
    return "strata.changelog.DatasetState", {
        "id": str(d.id), "name": d.name, "created_at": d.created_at,
        "default_blueprint": d.default_blueprint}


def _segment_state(s: Segment) -> tuple[str, SegmentState]:
    return "strata.changelog.SegmentState", {
        "dataset_id": _id_text(s.dataset_id), "segment_id": s.segment_id, "position": s.position,
        "created_offset": s.created_by.offset}


def _layer_state(x: Layer) -> tuple[str, LayerState]:
    return "strata.changelog.LayerState", {
        "dataset_id": _id_text(x.dataset_id), "segment_id": x.segment_id, "layer_name": x.layer_name,
        "storage_url": x.storage_url, "size_bytes": x.size_bytes, "schema_sha256": x.schema_sha256,
        "registered_at": x.registered_at, "registered_offset": x.registered_by.offset,
        "event_id": str(x.event_id), "num_chunks": x.num_chunks,
        "index_ranges": [{"timeline": r.timeline, "kind": str(r.kind), "start": r.start, "end": r.end}
                         for r in x.index_ranges],
        "properties": x.properties, "properties_schema_sha256": x.properties_schema_sha256,
        "properties_batch": x.properties_batch}


def _table_state(t: Table) -> tuple[str, TableState]:
    return "strata.changelog.TableState", {
        "id": str(t.id), "name": t.name, "created_at": t.created_at, "updated_at": t.updated_at,
        "storage_url": t.storage_url, "lance_version": t.lance_version, "revision": t.revision}
