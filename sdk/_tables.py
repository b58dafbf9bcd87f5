"""The segment table and the manifest, built as Arrow tables from the projection's rows.

Column names follow Rerun's catalog: ``rerun_segment_id``, ``rerun_layer_names``, ... and one
``property:<entity>:<field>`` column per property.
"""

from __future__ import annotations

from datetime import UTC
from itertools import groupby

import pyarrow as pa
import pyarrow.ipc

from projector import Layer, Segment

TIMESTAMP = pa.timestamp("ns", tz=None)


def _properties(layers: list[Layer]) -> pa.Table:
    """One row per layer, one column per property any layer has (null where it has none)."""
    tables = []
    for layer in layers:
        if layer.properties:
            tables.append(pa.ipc.open_stream(layer.properties).read_all())
        else:
            tables.append(pa.table({"__row": pa.array([None], pa.null())}))
    if not tables:
        return pa.table({})
    merged = pa.concat_tables(tables, promote_options="permissive")
    merged = merged.drop_columns([n for n in merged.column_names if n == "__row"])
    return merged.select(sorted(merged.column_names))


def _timestamps(values) -> pa.Array:
    return pa.array([v.astimezone(UTC).replace(tzinfo=None) for v in values], type=TIMESTAMP)


def manifest_table(layers: list[Layer]) -> pa.Table:
    """One row per (segment, layer): segments in registration order, layers by name."""
    rank = _segment_rank(layers)
    layers = sorted(layers, key=lambda x: (rank[x.segment_id], x.layer_name))
    base = pa.table({
        "rerun_segment_id": pa.array([x.segment_id for x in layers], pa.string()),
        "rerun_layer_name": pa.array([x.layer_name for x in layers], pa.string()),
        "rerun_storage_url": pa.array([x.storage_url for x in layers], pa.string()),
        "rerun_registration_time": _timestamps(x.registered_at for x in layers),
        "rerun_last_updated_at": _timestamps(x.registered_at for x in layers),
        "rerun_size_bytes": pa.array([x.size_bytes for x in layers], pa.uint64()),
        "rerun_schema_sha256": pa.array(
            [bytes.fromhex(x.schema_sha256) if x.schema_sha256 else None for x in layers],
            pa.binary(32)),
    })
    return _append_columns(base, _properties(layers))


def segment_table(segments: list[Segment], layers: list[Layer]) -> pa.Table:
    """One row per segment in registration order. ``layers`` must be grouped by segment, each
    group in registration order: the most recently registered layer wins each property."""
    by_segment = {sid: list(group) for sid, group in groupby(layers, key=lambda x: x.segment_id)}
    segments = [s for s in segments if s.segment_id in by_segment]
    base = pa.table({
        "rerun_segment_id": pa.array([s.segment_id for s in segments], pa.string()),
        "rerun_layer_names": pa.array(
            [[x.layer_name for x in by_segment[s.segment_id]] for s in segments],
            pa.list_(pa.string())),
        "rerun_storage_urls": pa.array(
            [[x.storage_url for x in by_segment[s.segment_id]] for s in segments],
            pa.list_(pa.string())),
        "rerun_last_updated_at": _timestamps(
            max(x.registered_at for x in by_segment[s.segment_id]) for s in segments),
        "rerun_size_bytes": pa.array(
            [sum(x.size_bytes for x in by_segment[s.segment_id]) for s in segments], pa.uint64()),
    })
    per_layer = _properties(layers)
    if per_layer.num_columns == 0:
        return base
    # Row index in ``layers`` of the last layer of each segment with a value, column by column.
    start = 0
    spans = {}
    for segment_id, group in by_segment.items():
        spans[segment_id] = range(start, start + len(group))
        start += len(group)
    merged = {}
    for name in per_layer.column_names:
        values = per_layer.column(name).to_pylist()
        picked = []
        for s in segments:
            winner = next((values[i] for i in reversed(spans[s.segment_id])
                           if values[i] is not None), None)
            picked.append(winner)
        merged[name] = pa.array(picked, type=per_layer.schema.field(name).type)
    properties = pa.Table.from_pydict(merged, schema=per_layer.schema)
    return _append_columns(base, properties)


def _segment_rank(layers: list[Layer]) -> dict[str, int]:
    rank: dict[str, int] = {}
    for layer in layers:
        rank.setdefault(layer.segment_id, len(rank))
    return rank


def _append_columns(base: pa.Table, extra: pa.Table) -> pa.Table:
    for field in extra.schema:
        base = base.append_column(field, extra.column(field.name))
    return base
