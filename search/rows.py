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
    for segment_id in segment_ids:
        layers = store.segment_layer_table(index.dataset_id, segment_id)
        if layers.num_rows:
            files = layer_files(layers, objects)[segment_id]
            tables.append(segment_rows(index, dataset_schema, segment_id, files).cast(schema))
    return pa.concat_tables(tables)


def segment_rows(index: SearchIndex, dataset_schema: pa.Schema, segment_id: str,
                 layers: Sequence[LayerFile]) -> pa.Table:
    """The index's rows of one segment (all its layers as one recording), in ``index_schema``.

    Raises what reading the layers raises (``NotFoundError``, ``RecordingChangedError``)."""
    schema = index_schema(index, dataset_schema)
    field = find_column(dataset_schema, index.entity_path, index.component)
    assert field is not None  # index_schema checked it
    time = schema.field(1)
    static = is_static(field)
    read = pa.schema([schema.field(SEGMENT_ID), *([] if static else [time]), field])
    options = ReadOptions(index=None if static else time.name, content_groups=((index.entity_path,),))
    table = read_segment(segment_id, layers, options, read)
    lists = table.column(field.name).combine_chunks()
    if pa.types.is_large_list(lists.type):
        lists = lists.cast(pa.list_(lists.type.value_type))
    values = pc.list_flatten(lists)
    parents = pc.list_parent_indices(lists).to_numpy()
    instance = np.arange(len(parents)) - np.searchsorted(parents, parents, side="left")
    times = (pa.nulls(len(values), time.type) if static
             else table.column(time.name).combine_chunks().take(pa.array(parents)))
    rows = pa.table([pa.array([segment_id] * len(values), pa.string()), times,
                     pa.array(instance, pa.uint32()), values], schema=schema)
    return rows.filter(pc.is_valid(rows.column(VALUE)))
