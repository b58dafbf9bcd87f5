"""An index's rows of one segment: the indexed column's instances on the index's timeline, read
from the segment's layers with rerun-sdk's engine, as ``recordings.segments`` reads them for
``reader()``.

Each row is one instance: the segment, the timeline's value (null for a static column), the
instance's index in its row's list, and the value (a vector, or a text). A null value, or a row
where the column has no data, gives no row.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from projector import ProjectionReader, SearchIndex, schemas
from projector.search_indexes import find_column, instance_type, is_static
from recordings.objects import ObjectStoreConfig
from recordings.segments import SEGMENT_ID, LayerFile, ReadOptions, layer_files, read_segment

WHOLE_TABLE_FROM = 32
"""From this many segments, their layers are read with the dataset's whole layer table."""
INSTANCE = "rerun_instance_index"
"""The instance's index in its row's list of instances."""
VALUE = "value"
"""The indexed value's column in an index's Lance dataset (the column's own name in results)."""


def index_schema(index: SearchIndex, dataset_schema: pa.Schema) -> pa.Schema:
    """The columns of an index's rows: segment, timeline, instance, value."""
    field = find_column(dataset_schema, index.entity_path, index.component)
    time = next((f for f in dataset_schema if f.name == index.definition.time_index), None)
    if field is None or time is None:  # the column or timeline left with the layers that had it
        raise LookupError(f"the dataset no longer has column {index.column!r} on timeline "
                          f"{index.definition.time_index!r}")
    return pa.schema([pa.field(SEGMENT_ID, pa.string(), nullable=False), pa.field(time.name, time.type),
                      pa.field(INSTANCE, pa.uint32(), nullable=False),
                      pa.field(VALUE, instance_type(field))])


def stored_rows(store: ProjectionReader, index: SearchIndex, schema: pa.Schema, segment_ids: Sequence[str],
                objects: ObjectStoreConfig) -> pa.Table:
    """The index's rows of ``segment_ids`` as the store has their layers now, in ``schema``
    (``index_schema``); none for a segment the store no longer has. Raises what reading the
    layers raises."""
    dataset = store.dataset(index.dataset_id)
    tables = [schema.empty_table()]
    if dataset is None or not dataset.schema:
        return tables[0]
    dataset_schema = schemas.parse(dataset.schema)
    if len(segment_ids) > WHOLE_TABLE_FROM:  # one read of every layer, not one per segment
        files = layer_files(store.layer_table(index.dataset_id), objects)
    else:
        files = {}
        for segment_id in segment_ids:
            files.update(layer_files(store.segment_layer_table(index.dataset_id, segment_id), objects))
    for segment_id in segment_ids:
        if segment_id in files:
            tables.append(segment_rows(index, dataset_schema, segment_id, files[segment_id]).cast(schema))
    return pa.concat_tables(tables)


def segment_rows(index: SearchIndex, dataset_schema: pa.Schema, segment_id: str,
                 layers: Sequence[LayerFile]) -> pa.Table:
    """The index's rows of one segment (all its layers as one recording), in ``index_schema``:
    ``reader_rows``'s rows, read from the chunks of the column's entity alone. Of the rows that
    give the column a value at one time (or, static, at all), the one with the highest row id
    counts, as the reader's. Raises what reading the layers raises (``NotFoundError``,
    ``RecordingChangedError``)."""
    from rerun.chunk import RrdReader

    schema = index_schema(index, dataset_schema)
    field = find_column(dataset_schema, index.entity_path, index.component)
    assert field is not None  # index_schema checked it
    time = schema.field(1)
    static = is_static(field)
    parts: list[pa.Table] = []
    for layer in layers:
        for chunk in RrdReader(layer.path()).stream().filter(content=[index.entity_path]).to_chunks():
            if chunk.is_static != static or chunk.entity_path != index.entity_path:
                continue
            batch = chunk.to_record_batch()
            data = [f.name for f in batch.schema if (f.metadata or {}).get(b"rerun:kind") == b"data"
                    and (f.metadata or {}).get(b"rerun:component", b"").decode() == index.component]
            if not data or (not static and time.name not in batch.schema.names):
                continue
            row_ids = next(f.name for f in batch.schema
                           if (f.metadata or {}).get(b"rerun:kind") == b"control")
            times = pa.nulls(batch.num_rows, time.type) if static else batch.column(time.name).cast(time.type)
            parts.append(pa.table({"row_id": batch.column(row_ids), "time": times,
                                   "lists": _plain_list(batch.column(data[0]))}))
    if not parts:
        return schema.empty_table()
    found = pa.concat_tables(parts, promote_options="permissive")
    found = found.filter(pc.is_valid(found.column("lists")))  # a row without the column: not logged
    if found.num_rows:
        order = pc.sort_indices(found, [("time", "ascending"), ("row_id", "ascending")])
        found = found.take(order)
        last = np.ones(found.num_rows, dtype=bool)  # the latest row of each time (static: of them all)
        if static:
            last[:-1] = False
        else:
            times = found.column("time").cast(pa.int64()).to_numpy()
            last[:-1] = times[1:] != times[:-1]
        found = found.filter(pa.array(last))
    return _instances(schema, segment_id, found.column("time").combine_chunks(),
                      found.column("lists").combine_chunks())


def _plain_list(lists: pa.Array) -> pa.Array:
    return lists.cast(pa.list_(lists.type.value_type)) if pa.types.is_large_list(lists.type) else lists


def _instances(schema: pa.Schema, segment_id: str, times: pa.Array, lists: pa.Array) -> pa.Table:
    """One row per instance of ``lists`` (one list per time of ``times``), without null values."""
    values = pc.list_flatten(lists)
    parents = pc.list_parent_indices(lists).to_numpy()
    instance = np.arange(len(parents)) - np.searchsorted(parents, parents, side="left")
    rows = pa.table([pa.array([segment_id] * len(values), pa.string()), times.take(pa.array(parents)),
                     pa.array(instance, pa.uint32()), values], schema=schema)
    return rows.filter(pc.is_valid(rows.column(VALUE)))


def reader_rows(index: SearchIndex, dataset_schema: pa.Schema, segment_id: str,
                layers: Sequence[LayerFile]) -> pa.Table:
    """The index's rows of one segment as ``reader()`` reads the segment (rerun-sdk's query
    engine): the specification ``segment_rows`` must equal (``tests/unit/test_search_rows.py``)."""
    schema = index_schema(index, dataset_schema)
    field = find_column(dataset_schema, index.entity_path, index.component)
    assert field is not None  # index_schema checked it
    time = schema.field(1)
    static = is_static(field)
    read = pa.schema([schema.field(SEGMENT_ID), *([] if static else [time]), field])
    options = ReadOptions(index=None if static else time.name, content_groups=((index.entity_path,),))
    table = read_segment(segment_id, layers, options, read)
    times = pa.nulls(table.num_rows, time.type) if static else table.column(time.name).combine_chunks()
    return _instances(schema, segment_id, times, _plain_list(table.column(field.name).combine_chunks()))
