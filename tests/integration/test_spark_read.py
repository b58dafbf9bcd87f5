"""A dataset read on Spark (a partition per segment, read on the executors) has the rows and column
names of ``reader()`` on the same dataset."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

import sdk
from sdk import ContentFilter
from sdk._spark import spark_schema, to_spark_types
from stack.droid import write_episode

pytestmark = pytest.mark.store_agnostic


def _rows(table: pa.Table) -> list[tuple]:
    return sorted(tuple(repr(v) for v in row.values()) for row in table.to_pylist())


@pytest.fixture
def episodes(dataset: sdk.DatasetEntry, tmp_path: Path) -> sdk.DatasetEntry:
    base = []
    for index in range(4):
        path = tmp_path / f"episode_{index}.rrd"
        write_episode(path, f"episode_{index}", index, steps=20, tracking_noise=0.05 * index)
        base.append(path.as_uri())
    dataset.register(base).wait()
    derived = []
    for index in (1, 3):  # a second layer on two segments, with its own entity
        path = tmp_path / f"episode_{index}_derived.rrd"
        write_episode(path, f"episode_{index}", 10 + index, steps=5, application_id="derived")
        derived.append(path.as_uri())
    dataset.register(derived, layer_name="derived").wait()
    return dataset


@pytest.mark.parametrize(("index", "contents"), [
    ("real_time", None),
    ("real_time", ["/observation/**", "/cameras/wrist_left/**"]),
    (None, ContentFilter.everything().include_properties()),
], ids=["everything", "observations-and-a-camera", "static-with-properties"])
def test_spark_reads_what_reader_reads(episodes: sdk.DatasetEntry, spark, index, contents) -> None:
    selection = episodes if contents is None else episodes.filter_contents(contents)
    local = pa.table(selection.reader(index=index))
    expected = to_spark_types(local, spark_schema(local.schema))
    assert local.num_rows > 0
    for per_partition, partitions in ((None, {2, 3}), (1, {4})):  # packed for 2 cores, or one each
        frame = selection.to_spark(spark, index, segments_per_partition=per_partition)
        assert frame.rdd.getNumPartitions() in partitions
        remote = frame.toArrow()
        assert remote.column_names == local.column_names
        assert remote.num_rows == local.num_rows
        assert _rows(remote) == _rows(expected)

