"""Rebuilding the projection from offset 0 into a new store, and swapping it in."""

from __future__ import annotations

import shutil
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from producers import end_offsets, read_range
from projector import LogRecord, SqliteStore, apply_batch
from spark_streaming.options import MAX_OFFSETS_PER_TRIGGER


class Progress:
    """A one-line progress bar on stderr: records applied of the records to replay."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.done = 0
        self.started = time.monotonic()

    def advance(self, store: SqliteStore) -> None:
        self.done = sum(store.next_offsets().values())
        self.show()

    def show(self) -> None:
        rate = self.done / max(time.monotonic() - self.started, 1e-9)
        share = self.done / self.total if self.total else 1.0
        bar = "#" * int(share * 30)
        print(f"\rreplay [{bar:<30}] {self.done:,}/{self.total:,} records, {rate:,.0f}/s",
              end="", file=sys.stderr, flush=True)


def rebuild(
    bootstrap_servers: str,
    directory: Path,
    *,
    spark_master: str = "local[*]",
    kafka_options: Mapping[str, str] | None = None,
    max_offsets_per_trigger: int = MAX_OFFSETS_PER_TRIGGER,
) -> Path:
    """Fold the whole log, from offset 0 to its current end, into ``directory/store.db`` (with
    its Spark checkpoint beside it); ``directory`` is emptied first. Returns the store's path."""
    from spark_streaming.job import ProjectorJob, build_session

    if directory.exists():
        shutil.rmtree(directory)
    directory.mkdir(parents=True)
    total = sum(end_offsets(bootstrap_servers, config=kafka_options).values())
    store = SqliteStore(directory / "store.db")
    progress = Progress(total)
    spark = build_session(spark_master, app_name="strata-replay")
    try:
        job = ProjectorJob(spark, bootstrap_servers, store, directory / "checkpoint",
                           kafka_options=kafka_options, max_offsets_per_trigger=max_offsets_per_trigger,
                           on_batch=lambda changes: progress.advance(store))
        query = job.start(available_now=True)
        query.awaitTermination()
        if query.exception() is not None:
            raise RuntimeError(f"the replay stopped on an error: {query.exception()}")
        progress.show()
        print(file=sys.stderr)
    finally:
        spark.stop()
        store.close()
    return directory / "store.db"


def swap_into(
    live_path: Path, rebuilt_path: Path, bootstrap_servers: str,
    *, kafka_options: Mapping[str, str] | None = None,
) -> int:
    """Make the live store a copy of the rebuilt one without losing what arrived meanwhile.

    With the live store locked for writing, the rebuilt store first applies the records the
    live projector had applied since the rebuild ended (read straight from Kafka), then its
    contents replace the live store's in one transaction. A running projector just waits for the
    lock, and its next batch skips what the new contents already hold. Returns how many records
    were caught up.
    """
    rebuilt = SqliteStore(rebuilt_path)
    live = SqliteStore(live_path)
    caught_up = 0

    def catch_up(live_offsets: dict[tuple[str, int], int]) -> None:
        nonlocal caught_up
        rows = read_range(bootstrap_servers, rebuilt.next_offsets(), live_offsets, config=kafka_options)
        apply_batch(rebuilt, [LogRecord.from_kafka(*row) for row in rows])
        caught_up = len(rows)

    try:
        live.replace_contents(rebuilt_path, catch_up)
    finally:
        live.close()
        rebuilt.close()
    return caught_up
