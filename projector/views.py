"""The read models clients share: a dataset's segment table and manifest, its index ranges, and
the list of datasets, built as Arrow tables from the store's layer tables (selecting from a
segment table: ``segment_filters``).

Column names follow Rerun's catalog: ``rerun_segment_id``, ``rerun_layer_names``, ... one
``property:<entity>:<field>`` column per property, and ``<timeline>:start`` / ``<timeline>:end``
per timeline. Both are computed column-wise from the store's
layer table (``projector.layer_table``), so their cost grows with the number of layers, not with
Python work per layer; each distinct properties value is parsed once. Which layer's value a
segment's property takes is ``projector.merge``'s rule.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc

from events import CATALOG_TOPIC
from projector import merge, schemas
from projector.model import ENTRIES_TABLE_NAME, EntryKind, Table
from projector.ports import ProjectionReader

TIMESTAMP = pa.timestamp("ns", tz=None)
INDEX_TYPES = {"timestamp": TIMESTAMP, "duration": pa.duration("ns"), "sequence": pa.int64()}


def _timestamps(micros: pa.ChunkedArray | pa.Array) -> pa.Array:
    return pc.cast(pc.cast(micros, pa.timestamp("us")), TIMESTAMP)


def _properties(layers: pa.Table, property_schemas: Mapping[str, bytes]) -> pa.Table:
    """One row per layer, one column per property any layer has (null where it has none).

    Each distinct value is read once: an inline Arrow IPC stream, or a compressed record batch
    with the schema its digest names in ``property_schemas``.
    """
    distinct: list[pa.Table] = []
    row_of = np.full(layers.num_rows, -1)
    inline = pc.dictionary_encode(layers.column("properties")).combine_chunks()
    values = inline.dictionary.to_pylist()
    first = np.full(len(values), -1)
    for number, blob in enumerate(values):
        if blob:
            first[number] = len(distinct)
            distinct.append(pa.ipc.open_stream(blob).read_all())
    if len(values):
        row_of = first[inline.indices.to_numpy(zero_copy_only=False)]
    batches = pc.dictionary_encode(layers.column("properties_batch")).combine_chunks()
    digests = pc.dictionary_encode(layers.column("properties_schema_sha256")).combine_chunks()
    by_reference = np.flatnonzero(pc.binary_length(layers.column("properties_batch")).to_numpy(
        zero_copy_only=False) > 0)
    if len(by_reference):
        # A value is a (schema, batch) pair: the same batch bytes may belong to two schemas.
        keys = (batches.indices.to_numpy(zero_copy_only=False)[by_reference].astype(np.int64)
                * len(digests.dictionary) + digests.indices.to_numpy(zero_copy_only=False)[by_reference])
        _, firsts, inverse = np.unique(keys, return_index=True, return_inverse=True)
        for row in by_reference[firsts]:
            schema = property_schemas[digests.dictionary[digests.indices[row].as_py()].as_py()]
            batch = batches.dictionary[batches.indices[row].as_py()].as_py()
            distinct.append(pa.Table.from_batches([schemas.read_properties(schema, batch)]))
        row_of[by_reference] = len(distinct) - len(firsts) + inverse
    if not distinct:
        return pa.table({})
    table = pa.concat_tables(distinct, promote_options="permissive").take(
        pa.array(row_of, pa.int64(), mask=row_of < 0))
    return table.select(sorted(table.column_names))


def manifest_table(layers: pa.Table, property_schemas: Mapping[str, bytes] | None = None) -> pa.Table:
    """One row per (segment, layer): segments in registration order, layers by name."""
    rank = pc.dictionary_encode(layers.column("segment_id")).combine_chunks().indices
    order = pc.sort_indices(pa.table({"rank": rank, "name": layers.column("layer_name")}),
                            sort_keys=[("rank", "ascending"), ("name", "ascending")])
    layers = layers.take(order)
    base = pa.table({
        "rerun_segment_id": layers.column("segment_id"),
        "rerun_layer_name": layers.column("layer_name"),
        "rerun_storage_url": layers.column("storage_url"),
        "rerun_registration_time": _timestamps(layers.column("registered_at")),
        "rerun_last_updated_at": _timestamps(layers.column("registered_at")),
        "rerun_size_bytes": pc.cast(layers.column("size_bytes"), pa.uint64()),
        "rerun_schema_sha256": layers.column("schema_sha256"),
    })
    return _append_columns(base, _properties(layers, property_schemas or {}))


def _segments(layers: pa.Table) -> tuple[pa.Array, np.ndarray, int]:
    """The segment ids in registration order, each layer's segment number, and the count."""
    encoded = pc.dictionary_encode(layers.column("segment_id").combine_chunks())
    return encoded.dictionary, encoded.indices.to_numpy(zero_copy_only=False), len(encoded.dictionary)


def index_ranges(layers: pa.Table) -> pa.Table:
    """``rerun_segment_id``, ``rerun_num_chunks`` (null where a layer did not report it) and the
    segment table's ``<timeline>:start`` / ``<timeline>:end`` columns, without the properties."""
    ids, group, count = _segments(layers)
    base = pa.table({"rerun_segment_id": ids, "rerun_num_chunks": _num_chunks(layers, group, count)})
    return _append_columns(base, _index_ranges(layers.column("index_ranges").combine_chunks(), group, count))


def _num_chunks(layers: pa.Table, group: np.ndarray, count: int) -> pa.Array:
    chunks = layers.column("num_chunks")
    total = np.zeros(count, np.int64)
    np.add.at(total, group, chunks.fill_null(0).to_numpy())
    unknown = np.zeros(count, bool)
    unknown[group[chunks.is_null().to_numpy(zero_copy_only=False)]] = True
    return pa.array(total.astype(np.uint64), mask=unknown)


def segment_table(layers: pa.Table, property_schemas: Mapping[str, bytes] | None = None) -> pa.Table:
    """One row per segment in registration order, its properties merged from its layers' by
    ``projector.merge.segment_properties``. ``property_schemas`` holds the schemas the layers' properties
    name, by digest."""
    segment_ids, group, count = _segments(layers)
    starts = np.flatnonzero(np.r_[True, group[1:] != group[:-1]]) if len(group) else np.array([], int)
    offsets = pa.array(np.r_[starts, len(group)].astype(np.int32))
    registered = layers.column("registered_at").to_numpy()
    sizes = layers.column("size_bytes").to_numpy()
    latest = np.full(count, np.iinfo(np.int64).min)
    np.maximum.at(latest, group, registered)
    total = np.zeros(count, np.int64)
    np.add.at(total, group, sizes)
    base = pa.table({
        "rerun_segment_id": segment_ids,
        "rerun_layer_names": _lists(offsets, layers.column("layer_name")),
        "rerun_storage_urls": _lists(offsets, layers.column("storage_url")),
        "rerun_last_updated_at": _timestamps(pa.array(latest)),
        "rerun_num_chunks": _num_chunks(layers, group, count),
        "rerun_size_bytes": pa.array(total.astype(np.uint64)),
    })
    ranges = _index_ranges(layers.column("index_ranges").combine_chunks(), group, count)
    per_layer = _properties(layers, property_schemas or {})
    if per_layer.num_columns == 0:
        return _append_columns(base, ranges)
    properties = merge.segment_properties(per_layer, group, count)
    return _append_columns(_append_columns(base, properties), ranges)


def _index_ranges(ranges: pa.ListArray, group: np.ndarray, count: int) -> pa.Table:
    """Per segment, ``<timeline>:start`` (the least start of its layers) and ``<timeline>:end``
    (the greatest end) for every timeline of any layer, typed and annotated as Rerun's."""
    flat = ranges.flatten()
    if not len(flat):
        return pa.table({})
    segments = group[pc.list_parent_indices(ranges).to_numpy()]
    timelines = flat.field("timeline").to_numpy(zero_copy_only=False)
    kinds = flat.field("kind").to_numpy(zero_copy_only=False)
    starts = flat.field("start").to_numpy()
    ends = flat.field("end").to_numpy()
    columns = {}
    fields = []
    for timeline in sorted(set(timelines)):
        here = timelines == timeline
        kind = kinds[here][0]
        for marker, values, pick, blank in (("start", starts, np.minimum, np.iinfo(np.int64).max),
                                            ("end", ends, np.maximum, np.iinfo(np.int64).min)):
            bound = np.full(count, blank)
            pick.at(bound, segments[here], values[here])
            name = f"{timeline}:{marker}"
            columns[name] = pa.array(bound, pa.int64(), mask=bound == blank).cast(INDEX_TYPES[kind])
            fields.append(pa.field(name, INDEX_TYPES[kind], metadata={
                "rerun:kind": "index", "rerun:index": timeline, "rerun:index_kind": kind,
                "rerun:index_marker": marker}))
    return pa.table(columns, schema=pa.schema(fields))


def _lists(offsets: pa.Array, values: pa.ChunkedArray) -> pa.ListArray:
    return pa.ListArray.from_arrays(offsets, values.combine_chunks())


def _append_columns(base: pa.Table, extra: pa.Table) -> pa.Table:
    for field in extra.schema:
        base = base.append_column(field, extra.column(field.name))
    return base


def property_schemas(store: ProjectionReader, layers: pa.Table) -> dict[str, bytes]:
    """The schemas the layers' properties name, by digest, read from ``store``."""
    digests = [d for d in pc.unique(layers.column("properties_schema_sha256")).to_pylist() if d]
    return store.schemas(digests)


def dataset_segment_table(store: ProjectionReader, dataset_id: uuid.UUID) -> pa.Table:
    """``segment_table`` of one dataset of ``store``."""
    layers = store.layer_table(dataset_id)
    return segment_table(layers, property_schemas(store, layers))


def layer_counts(segments: pa.Table) -> pa.Table:
    """One row per layer name of a segment table (``rerun_layer_names``), by name: ``name`` and
    the number of ``segments`` having a layer of that name."""
    counted = pc.value_counts(pc.list_flatten(segments.column("rerun_layer_names")))
    return pa.table({"name": counted.field("values"), "segments": counted.field("counts")}).sort_by("name")


@dataclass(frozen=True)
class Component:
    """A column of a recording's schema, as the entity tree lists it."""

    entity_path: str
    component: str
    component_type: str
    archetype: str
    arrow_type: str
    static: bool
    layer: str


@dataclass(frozen=True)
class SegmentDetail:
    """One segment as its page shows it: ``layers`` (its rows of the layer table), ``row`` (its
    one-row segment table: properties and each timeline's start and end, with their field
    metadata), the components of its layers' schemas by entity path (``entities``), and those
    schemas' index and component fields as one schema (``schema``: what a read of its data asks
    for; a field of several layers once)."""

    segment_id: str
    layers: pa.Table
    row: pa.Table
    entities: dict[str, list[Component]]
    schema: pa.Schema


def segment_detail(store: ProjectionReader, dataset_id: uuid.UUID, segment_id: str) -> SegmentDetail | None:
    """The segment ``segment_id`` of a dataset, read from its layers alone; None if it has none."""
    layers = store.segment_layer_table(dataset_id, segment_id)
    if not layers.num_rows:
        return None
    digests = {name: digest.hex() for name, digest in zip(
        layers["layer_name"].to_pylist(), layers["schema_sha256"].to_pylist(), strict=True) if digest}
    found = store.schemas(sorted(set(digests.values())))
    entities: dict[str, list[Component]] = {}
    fields: dict[str, pa.Field] = {}
    for layer, digest in digests.items():
        if digest not in found:
            continue
        for field in pa.ipc.read_schema(pa.py_buffer(found[digest])):
            meta = {k.decode(): v.decode() for k, v in (field.metadata or {}).items()}
            path = meta.get("rerun:entity_path", "")
            if meta.get("rerun:kind") == "index" or (meta.get("rerun:kind") == "data" and path):
                fields.setdefault(field.name, field)
            if meta.get("rerun:kind") != "data" or not path or path.startswith("/__properties"):
                continue
            entities.setdefault(path, []).append(Component(
                path, meta.get("rerun:component", field.name),
                meta.get("rerun:component_type", ""), meta.get("rerun:archetype", ""),
                str(field.type), meta.get("rerun:is_static") == "true", layer))
    return SegmentDetail(segment_id, layers, segment_table(layers, property_schemas(store, layers)),
                         dict(sorted(entities.items())), pa.schema(list(fields.values())))

DATASETS_SCHEMA = pa.schema([
    ("name", pa.string()), ("id", pa.string()), ("segments", pa.int64()), ("layers", pa.int64()),
    ("size_bytes", pa.int64()), ("updated_at", pa.timestamp("us", tz="UTC")),
])


def datasets_table(store: ProjectionReader) -> pa.Table:
    """One row per live dataset of ``store`` (not the hidden ones), oldest first: its name, id,
    segment and layer counts, total size and when it last changed. Counted from the Arrow layer
    tables, without a Python object per layer."""
    rows = []
    for dataset in store.datasets():
        if dataset.hidden:
            continue
        layers = store.layer_table(dataset.id)
        rows.append({"name": dataset.name, "id": str(dataset.id),
                     "segments": pc.count_distinct(layers["segment_id"]).as_py(),
                     "layers": layers.num_rows, "size_bytes": pc.sum(layers["size_bytes"]).as_py() or 0,
                     "updated_at": dataset.updated_at})
    return pa.Table.from_pylist(rows, schema=DATASETS_SCHEMA)


ENTRIES_SCHEMA = pa.schema(
    [pa.field("id", pa.binary(16), nullable=False), pa.field("name", pa.string(), nullable=False),
     pa.field("entry_kind", pa.uint8(), nullable=False,
              metadata={"rerun:component_type": "rerun.components.EntryKind"}),
     pa.field("created_at", TIMESTAMP, nullable=False), pa.field("updated_at", TIMESTAMP, nullable=False)])
"""Rerun's ``__entries`` columns: the id's 16 bytes, the name, the ``EntryKind`` value and the
times."""

_EPOCH = datetime.fromtimestamp(0, UTC)
ENTRIES_TABLE = Table(uuid.UUID(int=0), ENTRIES_TABLE_NAME, _EPOCH, _EPOCH,
                      ENTRIES_SCHEMA.serialize().to_pybytes(), system=True)
"""The system table listing every entry, hidden ones included: the nil id and the epoch, as
Rerun's server has it."""


def entries_table(store: ProjectionReader) -> pa.Table:
    """``ENTRIES_TABLE``'s rows: every live dataset (hidden ones too), table and the system
    table itself, oldest first."""
    entries = [(d.id, d.name, d.entry_kind, d.created_at, d.updated_at) for d in store.datasets()]
    entries += [(t.id, t.name, EntryKind.TABLE, t.created_at, t.updated_at)
                for t in [ENTRIES_TABLE, *store.tables()]]
    entries.sort(key=lambda e: (e[3], str(e[0])))
    columns = list(zip(*entries, strict=True))
    return pa.Table.from_arrays(
        [pa.array([i.bytes for i in columns[0]], pa.binary(16)), pa.array(columns[1], pa.string()),
         pa.array([int(k) for k in columns[2]], pa.uint8()), pa.array(columns[3], TIMESTAMP),
         pa.array(columns[4], TIMESTAMP)], schema=ENTRIES_SCHEMA)


def at_point(store: ProjectionReader, dataset_id: uuid.UUID, point: str) -> ProjectionReader:
    """``store`` as of ``point`` given as text (a command line's, a query parameter's): a log
    offset, or the name of a tag of the dataset. ``ValueError`` for an offset past what the store
    holds, ``LookupError`` for a name of no tag."""
    if point.isdigit():
        reached = store.next_offsets().get((CATALOG_TOPIC, 0), 0)
        if int(point) > reached:
            raise ValueError(f"offset {point} is past the store's {reached}")
        return store.at(int(point))
    tag = store.tag(dataset_id, point)
    if tag is None:
        names = ", ".join(t.name for t in store.tags(dataset_id)) or "none"
        raise LookupError(f"{point!r} is neither a log offset nor a tag of the dataset (its tags: {names})")
    return store.at(tag.offset)


DIFF_SCHEMA = pa.schema([
    ("rerun_segment_id", pa.string()), ("rerun_layer_name", pa.string()), ("change", pa.string()),
    ("old_storage_url", pa.string()), ("new_storage_url", pa.string()),
    ("old_registration_time", TIMESTAMP), ("new_registration_time", TIMESTAMP),
    ("property", pa.string()), ("old_value", pa.string()), ("new_value", pa.string()),
])
"""What changed between two points of a dataset, a row per change: ``change`` is one of
``segment_added``, ``segment_removed``, ``layer_added``, ``layer_removed``, ``layer_replaced``
(with both storage URLs and registration times) or ``property_changed`` (``property``, and its
values as text, null where the segment had none)."""


def diff_table(before: ProjectionReader, after: ProjectionReader, dataset_id: uuid.UUID) -> pa.Table:
    """What changed in dataset ``dataset_id`` from the catalog ``before`` to the catalog ``after``
    (two readers of one store at two points), by segment in ``after``'s order, then the segments
    only ``before`` had: each segment's own row first, then its layers (joined by layer name, a
    registration at another offset being a replacement), then its properties (as
    ``segment_table`` merges them)."""
    old, new = before.layer_table(dataset_id), after.layer_table(dataset_id)
    old_at = dict(zip(old["segment_id"].to_pylist(), old["position"].to_pylist(), strict=True))
    new_at = dict(zip(new["segment_id"].to_pylist(), new["position"].to_pylist(), strict=True))

    def order(segment_id: str, rank: int, name: str = "") -> tuple[Any, ...]:
        return (segment_id not in new_at, new_at.get(segment_id, old_at.get(segment_id)), rank, name)

    rows: list[tuple[tuple[Any, ...], dict[str, Any]]] = [
        (order(s, 0), {"rerun_segment_id": s, "change": "segment_added"})
        for s in new_at.keys() - old_at.keys()]
    rows += [(order(s, 0), {"rerun_segment_id": s, "change": "segment_removed"})
             for s in old_at.keys() - new_at.keys()]
    columns = ["segment_id", "layer_name", "storage_url", "registered_at", "registered_offset"]
    joined = old.select(columns).join(new.select(columns), keys=["segment_id", "layer_name"],
                                      join_type="full outer", left_suffix="_old", right_suffix="_new")
    for row in joined.to_pylist():
        was, now = row["registered_offset_old"], row["registered_offset_new"]
        if was != now:
            change = "layer_added" if was is None else "layer_removed" if now is None else "layer_replaced"
            rows.append((order(row["segment_id"], 1, row["layer_name"]), {
                "rerun_segment_id": row["segment_id"], "rerun_layer_name": row["layer_name"],
                "change": change,
                "old_storage_url": row["storage_url_old"], "new_storage_url": row["storage_url_new"],
                "old_registration_time": _micros_datetime(row["registered_at_old"]),
                "new_registration_time": _micros_datetime(row["registered_at_new"])}))
    rows += [(order(r["rerun_segment_id"], 2, r["property"]), r) for r in _property_changes(
        segment_table(old, property_schemas(before, old)), segment_table(new, property_schemas(after, new)))]
    rows.sort(key=lambda pair: pair[0])
    return pa.Table.from_pylist([row for _, row in rows], schema=DIFF_SCHEMA)


def _micros_datetime(micros: int | None) -> datetime | None:
    """A time stored as microseconds since the epoch, as the naive UTC ``datetime`` of ``TIMESTAMP``."""
    return None if micros is None else datetime(1970, 1, 1) + timedelta(microseconds=micros)


def _property_changes(old: pa.Table, new: pa.Table) -> list[dict[str, Any]]:
    """A row per property whose merged value differs, of each segment both tables have."""
    names = sorted({n for n in (*old.column_names, *new.column_names) if n.startswith("property:")})
    before = {r["rerun_segment_id"]: r for r in old.select(
        ["rerun_segment_id", *(n for n in names if n in old.column_names)]).to_pylist()}
    changes = []
    for row in new.select(["rerun_segment_id", *(n for n in names if n in new.column_names)]).to_pylist():
        was = before.get(row["rerun_segment_id"])
        if was is None:
            continue
        for name in names:
            if was.get(name) != row.get(name):
                changes.append({"rerun_segment_id": row["rerun_segment_id"], "change": "property_changed",
                                "property": name, "old_value": _text(was.get(name)),
                                "new_value": _text(row.get(name))})
    return changes


def _text(value: object) -> str | None:
    return None if value is None else str(value)
