"""The segment table and the manifest, built as Arrow tables from the projection's layers.

Column names follow Rerun's catalog: ``rerun_segment_id``, ``rerun_layer_names``, ... and one
``property:<entity>:<field>`` column per property. Both are computed column-wise from one
``layer table`` (see ``LAYER_COLUMNS``), so their cost grows with the number of layers, not with
Python work per layer; only layers that have properties are parsed.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc

TIMESTAMP = pa.timestamp("ns", tz=None)
LAYER_COLUMNS = pa.schema([
    ("segment_id", pa.string()), ("layer_name", pa.string()), ("storage_url", pa.string()),
    ("size_bytes", pa.int64()), ("registered_at", pa.int64()), ("schema_sha256", pa.string()),
    ("properties", pa.binary()),
])
"""One row per layer, grouped by segment (segments in registration order), each segment's layers
in registration order; ``registered_at`` in microseconds since the epoch (UTC)."""


def layer_table(rows: list[tuple]) -> pa.Table:
    """The layer table of rows in ``LAYER_COLUMNS`` order, as ``SqliteStore.layer_rows`` gives."""
    columns = list(zip(*rows, strict=True)) if rows else [[] for _ in LAYER_COLUMNS]
    return pa.table(columns, schema=LAYER_COLUMNS)


def _timestamps(micros: pa.ChunkedArray | pa.Array) -> pa.Array:
    return pc.cast(pc.cast(micros, pa.timestamp("us")), TIMESTAMP)


def _properties(layers: pa.Table) -> pa.Table:
    """One row per layer, one column per property any layer has (null where it has none)."""
    positions: dict[bytes, int] = {}
    distinct: list[pa.Table] = []
    index: list[int | None] = []
    for blob in layers.column("properties").to_pylist():
        if not blob:
            index.append(None)
            continue
        position = positions.get(blob)
        if position is None:
            position = positions[blob] = len(distinct)
            distinct.append(pa.ipc.open_stream(blob).read_all())
        index.append(position)
    if not distinct:
        return pa.table({})
    table = pa.concat_tables(distinct, promote_options="permissive").take(pa.array(index, pa.int64()))
    return table.select(sorted(table.column_names))


def manifest_table(layers: pa.Table) -> pa.Table:
    """One row per (segment, layer): segments in registration order, layers by name."""
    rank = pc.dictionary_encode(layers.column("segment_id")).combine_chunks().indices
    order = pc.sort_indices(pa.table({"rank": rank, "name": layers.column("layer_name")}),
                            sort_keys=[("rank", "ascending"), ("name", "ascending")])
    layers = layers.take(order)
    digests = [bytes.fromhex(d) if d else None for d in layers.column("schema_sha256").to_pylist()]
    base = pa.table({
        "rerun_segment_id": layers.column("segment_id"),
        "rerun_layer_name": layers.column("layer_name"),
        "rerun_storage_url": layers.column("storage_url"),
        "rerun_registration_time": _timestamps(layers.column("registered_at")),
        "rerun_last_updated_at": _timestamps(layers.column("registered_at")),
        "rerun_size_bytes": pc.cast(layers.column("size_bytes"), pa.uint64()),
        "rerun_schema_sha256": pa.array(digests, pa.binary(32)),
    })
    return _append_columns(base, _properties(layers))


def segment_table(layers: pa.Table) -> pa.Table:
    """One row per segment in registration order; the most recently registered layer with a
    value wins each property."""
    segment_ids = layers.column("segment_id").combine_chunks()
    encoded = pc.dictionary_encode(segment_ids)
    group = encoded.indices.to_numpy(zero_copy_only=False)
    count = len(encoded.dictionary)
    starts = np.flatnonzero(np.r_[True, group[1:] != group[:-1]]) if len(group) else np.array([], int)
    offsets = pa.array(np.r_[starts, len(group)].astype(np.int32))
    registered = layers.column("registered_at").to_numpy()
    sizes = layers.column("size_bytes").to_numpy()
    latest = np.full(count, np.iinfo(np.int64).min)
    np.maximum.at(latest, group, registered)
    total = np.zeros(count, np.int64)
    np.add.at(total, group, sizes)
    base = pa.table({
        "rerun_segment_id": encoded.dictionary,
        "rerun_layer_names": _lists(offsets, layers.column("layer_name")),
        "rerun_storage_urls": _lists(offsets, layers.column("storage_url")),
        "rerun_last_updated_at": _timestamps(pa.array(latest)),
        "rerun_size_bytes": pa.array(total.astype(np.uint64)),
    })
    per_layer = _properties(layers)
    if per_layer.num_columns == 0:
        return base
    rows = np.arange(len(group))
    winners = {}
    for name in per_layer.column_names:
        column = per_layer.column(name)
        valid = ~column.is_null().to_numpy(zero_copy_only=False)
        last = np.full(count, -1)
        np.maximum.at(last, group[valid], rows[valid])
        picks = pa.array(last, pa.int64(), mask=last < 0)
        winners[name] = column.take(picks)
    properties = pa.table(winners, schema=per_layer.schema)
    return _append_columns(base, properties)


def _lists(offsets: pa.Array, values: pa.ChunkedArray) -> pa.ListArray:
    return pa.ListArray.from_arrays(offsets, values.combine_chunks())


def _append_columns(base: pa.Table, extra: pa.Table) -> pa.Table:
    for field in extra.schema:
        base = base.append_column(field, extra.column(field.name))
    return base
