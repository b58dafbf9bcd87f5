"""Rebuilding the projection from offset 0 into a new store, and swapping it in.

A rebuild reads the log in ranges of offsets, one Spark job each: the range's tasks (contiguous
parts of at most ``TASK_RECORDS`` records, in order) decode its records on the executors
(``spark_streaming.decoding``), while the driver folds and commits the range before it. A range
holds about ``BATCH_BYTES`` of records, sized from the records read so far, so a log of small
events comes in large batches and one of large events in small ones.
"""

from __future__ import annotations

import concurrent.futures
import json
import logging
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from producers import end_offsets, read_range
from projector import LogRecord, apply_batch, open_store
from projector.stores import describe, snapshots
from projector.stores.snapshots import Snapshot
from projector.stores.sqlite import SqliteStore
from spark_streaming.decoding import PART, decode_partitions, parts_in_order, records
from spark_streaming.folding import KAFKA_COLUMNS, paused_gc

log = logging.getLogger("strata.replay")

Progress = Callable[[int, int], None]
"""Told ``(records folded, records to fold)`` as a rebuild goes."""
Offsets = dict[tuple[str, int], int]

TASK_RECORDS = 50_000
"""Records per decoding task, at most (the Kafka source's ``maxRecordsPerPartition``)."""
BATCH_BYTES = 16 << 20
"""About how many bytes of records (their Kafka values) a rebuild's batch holds: 31,500 DROID-like
registrations of 534 bytes. Replaying 200,000 of them took 23.9 s with 16 MiB and 28.1 s with
64 MiB (whose batch of 126,000 records kept the tasks waiting for the fold, and its process
tree at 2.8 GiB)."""
FIRST_BATCH_RECORDS = 20_000
"""The records of a rebuild's first batch, before their size is known."""


def _json(offsets: Offsets) -> str:
    topics: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in offsets.items():
        topics.setdefault(topic, {})[str(partition)] = offset
    return json.dumps(topics)


def decoded_range(spark: Any, bootstrap_servers: str, options: Mapping[str, str], start: Offsets,
                  stop: Offsets) -> pa.Table:
    """The records from ``start`` to ``stop`` (per topic and partition), decoded by Spark's tasks
    (``decoding.DECODED``, in offset order)."""
    reader = (spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap_servers)
              .option("assign", json.dumps({t: [p for (u, p) in start if u == t] for t, _ in start}))
              .option("startingOffsets", _json(start)).option("endingOffsets", _json(stop))
              .option("maxRecordsPerPartition", str(TASK_RECORDS)))
    for key, value in options.items():
        reader = reader.option(key, value)
    return parts_in_order(reader.load().select(*KAFKA_COLUMNS).mapInArrow(decode_partitions, PART).toArrow())


def batch_records(decoded: pa.Table, limit: int | None) -> int:
    """The records of the next batch: about ``BATCH_BYTES`` of records as large as ``decoded``'s,
    at most ``limit``."""
    if not decoded.num_rows:
        count = FIRST_BATCH_RECORDS
    else:
        size = pc.sum(pc.binary_length(decoded.column("raw"))).as_py() or 0
        count = max(1_000, BATCH_BYTES * decoded.num_rows // max(size, 1))
    return min(count, limit) if limit else count


def rebuild(
    bootstrap_servers: str,
    directory: Path,
    *,
    spark_master: str = "local[*]",
    kafka_options: Mapping[str, str] | None = None,
    batch_limit: int | None = None,
    snapshot: Snapshot | None = None,
    progress: Progress | None = None,
) -> Path:
    """Fold the whole log, from offset 0 to its current end, into ``directory/store.db``. With
    ``snapshot``, the store starts as its copy and folds only the log after its offsets.
    ``batch_limit``: at most this many records per batch (default: sized by ``BATCH_BYTES``).
    Returns the store's path.

    The store is built as ``store.db.partial`` (``SqliteStore(loading=True)``) and moved over
    ``store.db`` only once complete: a rebuild that fails or is killed leaves what was there, and
    the next one starts its partial store afresh.

    ``progress`` is told ``(records folded, records in the log)`` before the first batch (a
    snapshot's records count as folded) and after each batch. Raises ``RuntimeError`` if Spark
    cannot read the log.

    Examples:
        >>> rebuild("localhost:9092", Path("rebuild"), progress=lambda done, total: ...)  # doctest: +SKIP
        PosixPath('rebuild/store.db')
    """
    from spark_streaming.job import build_session, source_options

    directory.mkdir(parents=True, exist_ok=True)
    target, partial = directory / "store.db", directory / f"store.db{PARTIAL}"
    _remove_store(partial)
    ends = end_offsets(bootstrap_servers, config=kafka_options)
    total = sum(ends.values())
    store = SqliteStore(partial, loading=True)
    if snapshot is not None:
        snapshots.restore(store, snapshot)

    def folded() -> None:
        if progress is not None:
            progress(sum(store.next_offsets().values()), total)

    folded()
    kept = store.next_offsets()
    start = {key: kept.get(key, 0) for key in ends}
    spark = build_session(spark_master, app_name="strata-replay")
    options = source_options(kafka_options)

    def read(begin: Offsets, count: int) -> tuple[Offsets, pa.Table]:
        stop = {key: min(offset + count, ends[key]) for key, offset in begin.items()}
        try:
            return stop, decoded_range(spark, bootstrap_servers, options, begin, stop)
        except Exception as exc:  # noqa: BLE001 - Py4J and Spark errors: one line for the caller
            raise RuntimeError(f"the replay stopped on an error: {str(exc).splitlines()[0]}") from exc

    try:
        # The next range is read while this one folds: the driver's fold and the tasks' decoding
        # use a core each. (Making the fold's records in that thread too gained nothing: it then
        # waits for the driver's thread to let go of Python's interpreter lock.)
        with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="strata-replay-read") as reader:
            count = min(FIRST_BATCH_RECORDS, batch_limit or FIRST_BATCH_RECORDS)
            pending = reader.submit(read, start, count) if start != ends else None
            while pending is not None:
                waited = time.perf_counter()
                stop, decoded = pending.result()
                count = batch_records(decoded, batch_limit)
                pending = reader.submit(read, stop, count) if stop != ends else None
                started = time.perf_counter()
                with paused_gc():
                    batch = records(decoded)
                    made = time.perf_counter()
                    apply_batch(store, batch)
                log.info("%d records: waited %.0f ms for them, made the fold's records in %.0f ms, folded "
                         "and committed them in %.0f ms", decoded.num_rows, (started - waited) * 1000,
                         (made - started) * 1000, (time.perf_counter() - made) * 1000)
                del decoded, batch
                folded()
        store.finish_loading()
    finally:
        spark.stop()
        store.close()
    _remove_store(target, keep_file=True)
    os.replace(partial, target)
    _sync(directory)
    return target


PARTIAL = ".partial"
"""The suffix of a store being rebuilt."""


def _remove_store(path: Path, *, keep_file: bool = False) -> None:
    """Remove a SQLite file's write-ahead log and shared memory, and the file itself unless
    ``keep_file`` (a file about to be replaced whole: its log must not outlive it)."""
    for leftover in (path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm"),
                     *(() if keep_file else (path,))):
        leftover.unlink(missing_ok=True)


def _sync(directory: Path) -> None:
    """Make a rename in ``directory`` durable."""
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


SWAP_ATTEMPTS = 20
"""Catch-ups of the rebuilt store, at most, before a swap gives up on a live projector that keeps
getting ahead of it."""


def swap_into(
    live_location: str | Path, rebuilt_path: Path, bootstrap_servers: str,
    *, kafka_options: Mapping[str, str] | None = None,
) -> int:
    """Make the live store (SQLite or PostgreSQL) a copy of the rebuilt one without losing what
    arrived meanwhile.

    The rebuilt store first applies the log up to its current end, read straight from Kafka while
    the live store is not locked. Then, in one transaction of the live store, its contents replace
    the live store's if the rebuilt store has applied at least every record the live one has
    (``SqlStore.replace_contents``); if the live projector got further meanwhile, the rebuilt
    store catches up again. Kafka is never read with the live store locked: a running projector
    waits only for the local copy. Returns how many records were caught up.
    """
    rebuilt = SqliteStore(rebuilt_path)
    live = open_store(live_location)
    caught_up = 0
    try:
        for _ in range(SWAP_ATTEMPTS):
            end = end_offsets(bootstrap_servers, config=kafka_options)
            rows = read_range(bootstrap_servers, rebuilt.next_offsets(), end, config=kafka_options)
            apply_batch(rebuilt, [LogRecord.from_kafka(*row) for row in rows])
            caught_up += len(rows)
            if live.replace_contents(rebuilt):
                return caught_up
        raise RuntimeError(f"the live store at {describe(live_location)} kept getting ahead of the "
                           f"rebuilt one over {SWAP_ATTEMPTS} catch-ups; run 'strata replay --swap' "
                           "again when fewer commands arrive")
    finally:
        live.close()
        rebuilt.close()
