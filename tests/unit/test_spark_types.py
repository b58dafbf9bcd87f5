"""Arrow types Spark lacks, converted for ``to_spark`` without losing a value."""

from __future__ import annotations

import pyarrow as pa
import pytest

from sdk._spark import spark_schema, to_spark_types


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
