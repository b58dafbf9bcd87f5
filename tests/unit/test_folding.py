"""A task's fold of its Kafka partition (``spark_streaming.folding.fold_partitions``), run here
as Spark runs it on an executor, without Spark: Arrow batches of Kafka rows in, a summary out."""

from __future__ import annotations

import uuid
from pathlib import Path

import pyarrow as pa

from events import CATALOG_TOPIC, CreateDataset, Event, RegisterLayer, encode
from projector import open_store
from spark_streaming.folding import KAFKA_COLUMNS, SUMMARY_SCHEMA, fold_partitions
from stores import dump, store_offsets


def kafka_rows(values: list[bytes], *, first_offset: int = 0) -> pa.Table:
    """Kafka rows in ``KAFKA_COLUMNS``, as Spark's Kafka source hands them to a task."""
    offsets = list(range(first_offset, first_offset + len(values)))
    return pa.table({"topic": [CATALOG_TOPIC] * len(values),
                     "partition": pa.array([0] * len(values), pa.int32()),
                     "offset": offsets, "value": values}).select(list(KAFKA_COLUMNS))


def registrations(count: int) -> list[bytes]:
    dataset = uuid.uuid4()
    commands = [CreateDataset("runs")] + [
        RegisterLayer(segment_id=f"s{i}", layer_name="base", storage_url=f"file:///r/{i}.rrd", size_bytes=i)
        for i in range(count)]
    return [encode(Event(dataset, command)) for command in commands]


def test_a_task_commits_its_partition_once_and_a_rerun_of_it_changes_nothing(tmp_path: Path) -> None:
    location = str(tmp_path / "store.db")
    open_store(location).close()
    rows = kafka_rows([*registrations(5), b"not an event"])
    fold = fold_partitions(location)
    [summary] = list(fold(iter(rows.to_batches(max_chunksize=2))))
    assert summary.schema.names == [field.split()[0] for field in SUMMARY_SCHEMA.split(", ")]
    assert summary.to_pylist()[0] | {"host": None, "pid": None} == {
        "topic": CATALOG_TOPIC, "partition": 0, "first_offset": 0, "last_offset": 6, "records": 7,
        "outcomes": 6, "not_accepted": 0, "rejections": 1, "fault": None, "host": None, "pid": None}
    stored = dump(location)
    # Spark runs a task again when its executor is lost after the commit: nothing is applied twice.
    [again] = list(fold(iter(rows.to_batches())))
    assert again.to_pylist()[0]["outcomes"] == 0
    assert dump(location) == stored
    assert store_offsets(location) == {(CATALOG_TOPIC, 0): 7}


def test_a_task_without_records_reports_nothing(tmp_path: Path) -> None:
    fold = fold_partitions(str(tmp_path / "store.db"))
    assert list(fold(iter([]))) == []
    assert list(fold(iter(kafka_rows([]).to_batches()))) == []


def test_a_store_that_cannot_be_written_is_reported_and_nothing_is_committed(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("")
    location = str(tmp_path / "a-file" / "store.db")  # under a file: it cannot be made
    [summary] = list(fold_partitions(location)(iter(kafka_rows(registrations(1)).to_batches())))
    fault = summary.to_pylist()[0]["fault"]
    assert fault is not None and location in fault, fault
    assert summary.to_pylist()[0]["outcomes"] == 0
