"""A dataset read on a Spark cluster: each segment read whole by one task on an executor, with the
same code as ``reader()`` (``recordings.read_segment``), through ``mapInArrow``.

Segments are packed into partitions as Spark's file sources pack files: a segment is never split,
and a partition takes segments while their bytes plus an opening cost of 4 MiB each stay under
128 MiB (``spark.sql.files.maxPartitionBytes`` and ``openCostInBytes``' defaults), or less when that
leaves cores idle. A Python task costs Spark about 170 ms on a 2-core machine, against about 8 ms
to read a DROID-like episode: one task per small segment would spend its time starting tasks.
``segments_per_partition`` sets the count instead (1: a partition per segment).

Spark holds fewer Arrow types than Rerun writes, so columns are converted losslessly:
timestamps and durations become int64 in their own unit (nanoseconds for Rerun's timelines: Spark's
timestamps have microseconds, and 15 Hz timelines are not microsecond-aligned), unsigned integers
the next wider signed type (``uint64`` a 20-digit decimal), byte lists (image and video blobs)
binary, fixed-size lists lists, dictionaries their values. Names are ``reader()``'s; Arrow field
metadata does not survive Spark.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pyarrow as pa

from recordings import LayerFile, ReadOptions, read_segment

MAX_PARTITION_BYTES = 128 * 1024 * 1024
OPEN_COST_BYTES = 4 * 1024 * 1024

_WIDER = {pa.uint8(): pa.int16(), pa.uint16(): pa.int32(), pa.uint32(): pa.int64(),
          pa.uint64(): pa.decimal128(20, 0), pa.float16(): pa.float32()}


def spark_type(t: pa.DataType, name: str = "") -> pa.DataType:
    """The Arrow type Spark holds for values of type ``t``, without losing any.

    Raises ``ValueError`` naming the column for a type Spark has no counterpart for (unions).
    """
    if pa.types.is_timestamp(t) or pa.types.is_duration(t):
        return pa.int64()
    if t in _WIDER:
        return _WIDER[t]
    if pa.types.is_dictionary(t):
        return spark_type(t.value_type, name)
    if pa.types.is_large_string(t):
        return pa.string()
    if pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return pa.binary()
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        if t.value_type == pa.uint8():
            return pa.binary()
        return pa.list_(pa.field(t.value_field.name, spark_type(t.value_type, name), t.value_field.nullable))
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, spark_type(f.type, name), f.nullable) for f in t])
    if pa.types.is_union(t) or pa.types.is_map(t):
        raise ValueError(f"column {name!r} has Arrow type {t}, which Spark cannot hold; leave it out "
                         "with filter_contents()")
    return t


def spark_schema(schema: pa.Schema) -> pa.Schema:
    """``schema`` with every column in ``spark_type``, without field metadata."""
    return pa.schema([pa.field(f.name, spark_type(f.type, f.name), f.nullable) for f in schema])


def _convert(array: pa.Array, target: pa.DataType) -> pa.Array:
    if array.type == target:
        return array
    if pa.types.is_dictionary(array.type):
        return _convert(array.dictionary_decode(), target)
    if pa.types.is_fixed_size_list(array.type):
        return _convert(array.cast(pa.list_(array.type.value_field)), target)
    if pa.types.is_large_list(array.type):
        return _convert(array.cast(pa.list_(array.type.value_field)), target)
    if pa.types.is_list(array.type) and pa.types.is_binary(target):
        # A list of bytes has a binary array's layout: the same offsets over the same bytes.
        values = array.values
        if values.offset == 0 and values.null_count == 0:
            return pa.Array.from_buffers(pa.binary(), len(array),
                                         [array.buffers()[0], array.buffers()[1], values.buffers()[1]],
                                         null_count=array.null_count, offset=array.offset)
        return pa.array([None if v is None else bytes(v) for v in array.to_pylist()], pa.binary())
    if pa.types.is_list(array.type):
        values = _convert(array.values, target.value_type)
        return pa.ListArray.from_arrays(array.offsets, values, type=target,
                                        mask=array.is_null() if array.null_count else None)
    if pa.types.is_struct(array.type):
        fields = [_convert(array.field(f.name), f.type) for f in target]
        return pa.StructArray.from_arrays(fields, fields=list(target),
                                          mask=array.is_null() if array.null_count else None)
    return array.cast(target)


def to_spark_types(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """``table`` converted to ``schema`` (a ``spark_schema``), column by column."""
    return pa.Table.from_arrays(
        [_convert(table.column(f.name).combine_chunks(), f.type) for f in schema], schema=schema)


def pack(sizes: Sequence[int], parallelism: int, segments_per_partition: int | None = None
         ) -> list[list[int]]:
    """The segments (by position in ``sizes``, their bytes) of each partition, in order."""
    if segments_per_partition is not None:
        if segments_per_partition < 1:
            raise ValueError(f"segments_per_partition must be at least 1, got {segments_per_partition}")
        return [list(range(i, min(i + segments_per_partition, len(sizes))))
                for i in range(0, len(sizes), segments_per_partition)]
    costs = [size + OPEN_COST_BYTES for size in sizes]
    split = min(MAX_PARTITION_BYTES, max(OPEN_COST_BYTES, sum(costs) // max(1, parallelism)))
    partitions: list[list[int]] = []
    used = 0
    for number, cost in enumerate(costs):
        if not partitions or used + cost > split:
            partitions.append([])
            used = 0
        partitions[-1].append(number)
        used += cost
    return partitions


def read_dataset(spark: Any, segments: Mapping[str, Sequence[LayerFile]], options: ReadOptions,
                 schema: pa.Schema, index_values: Mapping[str, Any] | None = None, *,
                 segments_per_partition: int | None = None) -> Any:
    """A Spark DataFrame of the segments, read on the executors, a segment by one task."""
    from pyspark.sql.pandas.types import from_arrow_schema

    target = spark_schema(schema)
    ids = sorted(segments)
    tasks = [(segment_id, list(segments[segment_id]),
              None if index_values is None else index_values[segment_id]) for segment_id in ids]
    partitions = pack([sum(layer.size_bytes for layer in segments[s]) for s in ids],
                      spark.sparkContext.defaultParallelism, segments_per_partition)

    def read(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for partition in batch.column(0).to_pylist():
                for task in partitions[partition]:
                    segment_id, layers, values = tasks[task]
                    table = to_spark_types(read_segment(segment_id, layers, options, schema, values),
                                           target)
                    yield from table.to_batches(max_chunksize=8192)

    count = max(1, len(partitions))
    return spark.range(count, numPartitions=count).mapInArrow(read, from_arrow_schema(target))
