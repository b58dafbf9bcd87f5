"""Arrow types Spark lacks, converted for ``to_spark`` without losing a value."""

from __future__ import annotations

import pyarrow as pa
import pytest

from sdk._spark import MAX_PARTITION_BYTES, OPEN_COST_BYTES, pack, spark_schema, to_spark_types


def test_conversions_lose_nothing() -> None:
    blobs = pa.array([[b"\xff\xd8", b""], None, [b"\x00"]], pa.list_(pa.list_(pa.uint8())))
    table = pa.table({
        "t": pa.array([1_689_000_000_066_666_667, None, 5], pa.timestamp("ns")),
        "blob": blobs,
        "xyz": pa.array([[[1, 2, 3]], [], None], pa.list_(pa.list_(pa.float32(), 3))),
        "color": pa.array([[2**32 - 1], [0], None], pa.list_(pa.uint32())),
    })
    converted = to_spark_types(table, spark_schema(table.schema))
    assert converted.column("t").to_pylist() == [1_689_000_000_066_666_667, None, 5]
    assert converted.column("blob").to_pylist() == [[b"\xff\xd8", b""], None, [b"\x00"]]
    assert converted.column("xyz").to_pylist() == [[[1, 2, 3]], [], None]
    assert converted.column("color").to_pylist() == [[2**32 - 1], [0], None]
    with pytest.raises(ValueError, match="'u'.*Spark cannot hold"):
        spark_schema(pa.schema([("u", pa.dense_union([pa.field("a", pa.int8())]))]))


def test_segments_are_packed_like_small_files() -> None:
    episode = 800_000
    # Few small segments spread over the cores; many fill partitions up to the byte limit.
    assert pack([episode] * 4, parallelism=2) == [[0, 1], [2, 3]]
    many = pack([episode] * 1000, parallelism=2)
    assert sum(map(len, many)) == 1000 and [i for p in many for i in p] == list(range(1000))
    assert max(len(p) for p in many) == MAX_PARTITION_BYTES // (episode + OPEN_COST_BYTES)
    # A segment larger than the limit is never split: it has a partition of its own.
    assert pack([10, 2 * MAX_PARTITION_BYTES, 10], parallelism=1) == [[0], [1], [2]]
    assert pack([1] * 5, parallelism=2, segments_per_partition=2) == [[0, 1], [2, 3], [4]]
    with pytest.raises(ValueError, match="at least 1"):
        pack([1], parallelism=2, segments_per_partition=0)
