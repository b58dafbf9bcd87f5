"""Many recordings' facts read on a Spark cluster: each task reads a contiguous run of the URIs
with ``read_recording`` on an executor, as the worker pool does on this machine, and the driver
gets every recording back in URI order.

A read is pure, so a task Spark runs again (its executor lost, say) reads the same facts again,
and nothing it read is kept twice. A file that cannot be read is not a failed task: its error is
handed back as it was raised, and the driver raises the first one in URI order, as
``read_recordings`` does, with the same words.

Takes the caller's ``SparkSession`` and imports nothing of pyspark itself.
"""

from __future__ import annotations

import functools
import pickle
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa

from recordings.bulk import Progress
from recordings.files import Recording, read_recording
from recordings.objects import ObjectStore

URIS = "index long, uri string"
READ = "index long, read binary"
"""Each URI's place in the call, and its recording or the error its read raised (pickled)."""


def read_recordings_on_spark(spark: Any, uris: Sequence[str], objects: ObjectStore, *,
                             blueprint: bool = False, progress: Progress | None = None,
                             tasks: int | None = None) -> list[Recording]:
    """What ``read_recording`` reads of each URI (each a blueprint's, with ``blueprint``), in the
    order of ``uris``, read by ``tasks`` Spark tasks of ``spark`` (a ``SparkSession``; default:
    its default parallelism), each a contiguous run of the URIs. ``s3://`` objects are read with
    ``objects``' configuration on the executors, ``file://`` paths from the executors' file
    system. ``progress`` is told ``(0, total)`` before and ``(total, total)`` once all are read.

    Raises what ``read_recording`` raises for the first URI, in order, whose read fails.
    """
    total = len(uris)
    if progress is not None:
        progress(0, total)
    if not total:
        return []
    count = max(1, min(total, tasks or spark.sparkContext.defaultParallelism))
    rows = spark.sparkContext.parallelize(list(enumerate(uris)), count)  # contiguous slices, in order
    read = functools.partial(_read_batches, objects=objects, blueprint=blueprint)
    table = spark.createDataFrame(rows, URIS).mapInArrow(read, READ).toArrow()
    found = sorted(zip(table.column("index").to_pylist(), table.column("read").to_pylist(), strict=True))
    if [index for index, _ in found] != list(range(total)):
        raise RuntimeError(f"Spark handed back {len(found)} reads of {total} recordings")
    recordings = []
    for _, read_bytes in found:
        value = pickle.loads(read_bytes)
        if isinstance(value, BaseException):
            raise value
        recordings.append(value)
    if progress is not None:
        progress(total, total)
    return recordings


def _read_batches(batches: Iterator[pa.RecordBatch], *, objects: ObjectStore,
                  blueprint: bool) -> Iterator[pa.RecordBatch]:
    """On an executor: each URI's recording, or the error reading it raised."""
    for batch in batches:
        reads = [_read(uri, objects, blueprint) for uri in batch.column("uri").to_pylist()]
        yield pa.RecordBatch.from_arrays([batch.column("index"), pa.array(reads, pa.binary())],
                                         names=["index", "read"])


def _read(uri: str, objects: ObjectStore, blueprint: bool) -> bytes:
    try:
        return pickle.dumps(read_recording(uri, objects, blueprint=blueprint))
    except Exception as exc:  # noqa: BLE001 - the error is handed back to be raised in the driver
        try:
            return pickle.dumps(exc)
        except Exception:  # noqa: BLE001 - an error that cannot be pickled keeps its words
            return pickle.dumps(RuntimeError(f"{uri}: {type(exc).__name__}: {exc}"))
