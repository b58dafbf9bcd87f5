"""The segment table and the manifest, built as Arrow tables from the projection's layers.

Column names follow Rerun's catalog: ``rerun_segment_id``, ``rerun_layer_names``, ... and one
``property:<entity>:<field>`` column per property. Both are computed column-wise from the store's
layer table (``projector.layer_table``), so their cost grows with the number of layers, not with
Python work per layer; each distinct properties value is parsed once.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc

TIMESTAMP = pa.timestamp("ns", tz=None)


def _timestamps(micros: pa.ChunkedArray | pa.Array) -> pa.Array:
    return pc.cast(pc.cast(micros, pa.timestamp("us")), TIMESTAMP)


def _properties(layers: pa.Table) -> pa.Table:
    """One row per layer, one column per property any layer has (null where it has none)."""
    encoded = pc.dictionary_encode(layers.column("properties")).combine_chunks()
    values = encoded.dictionary.to_pylist()
    distinct = [pa.ipc.open_stream(blob).read_all() for blob in values if blob]
    if not distinct:
        return pa.table({})
    # Dictionary entries that are empty (no properties) take no row of the concatenated table.
    rows = np.cumsum([bool(blob) for blob in values]) - 1
    rows[[not blob for blob in values]] = -1
    index = rows[encoded.indices.to_numpy(zero_copy_only=False)]
    table = pa.concat_tables(distinct, promote_options="permissive").take(
        pa.array(index, pa.int64(), mask=index < 0))
    return table.select(sorted(table.column_names))


def manifest_table(layers: pa.Table) -> pa.Table:
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
