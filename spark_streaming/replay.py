"""Rebuilding the projection from offset 0 into a new store, and swapping it in."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Mapping
from pathlib import Path

from producers import end_offsets, read_range
from projector import Changes, LogRecord, apply_batch, open_store
from projector.stores import describe, snapshots
from projector.stores.snapshots import Snapshot
from projector.stores.sqlite import SqliteStore
from spark_streaming.options import MAX_OFFSETS_PER_TRIGGER

Progress = Callable[[int, int], None]
"""Told ``(records folded, records to fold)`` as a rebuild goes."""


def rebuild(
    bootstrap_servers: str,
    directory: Path,
    *,
    spark_master: str = "local[*]",
    kafka_options: Mapping[str, str] | None = None,
    max_offsets_per_trigger: int = MAX_OFFSETS_PER_TRIGGER,
    snapshot: Snapshot | None = None,
    progress: Progress | None = None,
) -> Path:
    """Fold the whole log, from offset 0 to its current end, into ``directory/store.db`` (with
    its Spark checkpoint beside it); ``directory`` is emptied first. With ``snapshot``, the store
    starts as its copy and folds only the log after its offsets. Returns the store's path.

    ``progress`` is told ``(records folded, records in the log)`` before the first batch (a
    snapshot's records count as folded) and after each batch, from the thread Spark runs batches
    in. Raises ``RuntimeError`` if the streaming query stops on an error.

    Examples:
        >>> rebuild("localhost:9092", Path("rebuild"), progress=lambda done, total: ...)  # doctest: +SKIP
        PosixPath('rebuild/store.db')
    """
    from spark_streaming.job import ProjectorJob, build_session

    if directory.exists():
        shutil.rmtree(directory)
    directory.mkdir(parents=True)
    total = sum(end_offsets(bootstrap_servers, config=kafka_options).values())
    store = SqliteStore(directory / "store.db")
    if snapshot is not None:
        snapshots.restore(store, snapshot)

    def folded(changes: Changes | None = None) -> None:
        if progress is not None:
            progress(sum(store.next_offsets().values()), total)

    folded()
    spark = build_session(spark_master, app_name="strata-replay")
    try:
        job = ProjectorJob(spark, bootstrap_servers, store, directory / "checkpoint",
                           kafka_options=kafka_options, max_offsets_per_trigger=max_offsets_per_trigger,
                           on_batch=folded)
        query = job.start(available_now=True)
        query.awaitTermination()
        if query.exception() is not None:
            raise RuntimeError(f"the replay stopped on an error: {query.exception()}")
    finally:
        spark.stop()
        store.close()
    return directory / "store.db"


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
