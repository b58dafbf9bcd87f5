"""The projector's Spark job."""

from __future__ import annotations

import concurrent.futures
import json
import logging
import os
import shutil
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming.query import StreamingQuery

import settings
from events import TOPICS
from projector import Changes, LogRecord, ProjectionWriter, Status, apply_batch
from projector.ports import StoreUnavailableError
from projector.stores import fault_advice
from spark_streaming.decoding import PART, decode_partitions, parts_in_order, records
from spark_streaming.folding import KAFKA_COLUMNS, SUMMARY_SCHEMA, decode_batch, fold_partitions, paused_gc
from spark_streaming.options import MAX_OFFSETS_PER_TRIGGER, java_config

log = logging.getLogger("strata.projector")


def connector_jars() -> list[Path]:
    """Spark's Kafka source and its dependencies, as fetched by scripts/setup.sh."""
    directory = settings.jars_dir() / "spark-kafka"
    jars = sorted(directory.glob("*.jar"))
    if not jars:
        raise FileNotFoundError(
            f"no Spark Kafka connector jars in {directory}: run scripts/setup.sh first "
            "(or set STRATA_JARS_DIR to the directory that holds spark-kafka/)")
    return jars


# Spark's Kafka consumer otherwise waits fetch.max.wait.ms (500 ms) on every fetch that ends at
# the head of the log, which is every fetch of a live stream: measured 600 ms per one-record
# batch at the default, 140 ms at 10 ms. Large batches are not slowed: a full fetch returns at once.
DEFAULT_KAFKA_OPTIONS = {"kafka.fetch.max.wait.ms": "10"}

# The driver JVM's options, where local[*] runs every task; a session's own options are added.
JVM_OPTIONS = [
    # Not G1: with G1, the 25 ms polling delay below made a one-record batch slower
    # (register().wait() p50 95-100 -> 115-156 ms); with the parallel collector p50 stayed at
    # 100-102 ms. The serial collector then did as well with less memory: in back-to-back runs
    # against the parallel one, the projector's process tree idled at 551 instead of 664 MiB, p50
    # 111 against 131 ms, producer bursts at 2,788 against 2,621 events/s (README, "Start-up").
    "-XX:+UseSerialGC",
    # The heap grows only as far as batches need.
    "-Xms64m",
    # The quick compiler only: the optimizing one spent 5.2 of the JVM's 11.3 CPU seconds of a
    # 200,000-registration burst compiling, on a core the tasks and the fold need. Without it the
    # tasks took 2.5 s instead of 2.3, a Server started in 4.7 s instead of 6.2, and its first
    # registration was visible after 6.7 s instead of 9.6 (docs/performance.md, "Start-up").
    "-XX:TieredStopAtLevel=1",
]

# Spark settings for a long-running stream of small batches; build_session's ``conf`` overrides
# any of them. Measured together on a 2-core machine, against Spark's defaults, in back-to-back runs
# (README, "Performance notes").
DEFAULT_SPARK_CONF = {
    # An idle stream asks the broker for the log's end offsets after every pollingDelay (10 ms by
    # default). 25 ms cut the idle CPU of the Spark JVM from 25-28% to 15-18% of a core and of
    # the broker from 20-25% to 15-18% (with the serial collector, ``JVM_OPTIONS``).
    "spark.sql.streaming.pollingDelay": "25ms",
    # Spark turns adaptive execution off for streaming queries anyway and logs a warning at each
    # start when it is on; no measured effect otherwise.
    "spark.sql.adaptive.enabled": "false",
    # The log's end offsets asked of the driver's Kafka consumer (one ListOffsets request) rather
    # than of an admin client (metadata, then ListOffsets): an idle stack's broker then used 10-12%
    # of a core instead of 19-20%, its Spark JVM 15-18% instead of 22-25% (30 s of /proc, polling
    # every 25 ms as above).
    "spark.sql.streaming.kafka.useDeprecatedOffsetFetching": "true",
}


def source_options(kafka_options: Mapping[str, str] | None) -> dict[str, str]:
    """The Kafka source's options for Kafka client settings (SASL, TLS, ...): the Java client's
    names, ``kafka.``-prefixed, over ``DEFAULT_KAFKA_OPTIONS``."""
    given = java_config(kafka_options)
    return {**DEFAULT_KAFKA_OPTIONS, **{f"kafka.{key}": value for key, value in given.items()}}


def build_session(master: str = "local[*]", *, app_name: str = "strata-projector",
                  conf: Mapping[str, str] | None = None) -> SparkSession:
    """A SparkSession with the Kafka connector on its classpath and settings for small batches;
    ``conf`` adds Spark settings (or overrides these)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        # Batches are small and folded in the driver: one shuffle partition avoids empty tasks.
        .config("spark.sql.shuffle.partitions", "1")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
    )
    jars = [str(j) for j in connector_jars()]
    # Locally, executors run in the driver's JVM: the connector on its class path, where the
    # class-data archive covers its classes too (it does not cover jars spark.jars adds at run time).
    connector = ({"spark.driver.extraClassPath": ":".join(jars)} if master.startswith("local")
                 else {"spark.jars": ",".join(jars)})
    conf = {**connector, **DEFAULT_SPARK_CONF, **(conf or {})}
    # The driver's classes from the archive setup made (see settings.class_data_archive): the
    # session started in 3.1-3.2 s instead of 4.9-5.4, its first job in 0.9-1.0 s instead of 1.9-2.0.
    options = [*JVM_OPTIONS, conf.get("spark.driver.extraJavaOptions"), *settings.class_data_options("spark")]
    conf["spark.driver.extraJavaOptions"] = " ".join(option for option in options if option)
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark


def starting_offsets(next_offsets: Mapping[tuple[str, int], int]) -> str:
    """Where a query without a checkpoint starts reading: the store's next offsets when it has one
    for each topic (strata's topics have one partition), else the beginning of the log. A lost or
    deleted checkpoint then costs no re-reading of what the store already holds."""
    if set(next_offsets) != {(topic, 0) for topic in TOPICS}:
        return "earliest"
    return json.dumps({topic: {"0": next_offsets[(topic, 0)]} for topic in TOPICS})


EXECUTOR_BATCH_RECORDS = 1_000
"""A batch goes to the executors when the previous one had at least this many records (a burst, a
catch-up after a restart): with an ``executor_store`` to be folded there (and so does the first
batch), else to be decoded there while the driver folds the batch before. A smaller batch is
decoded and folded in the driver at once: a task's round trip through a Python worker cost a
one-record batch 150-210 ms on this 2-core machine, against 70-90 ms in the driver, and the first
batch of a new stack about 1 s (Spark starts its Python workers)."""
TASK_RECORDS = 10_000
"""Records per decoding task of a batch, at most (the Kafka source's ``maxRecordsPerPartition``):
a batch of 20,000 is decoded by two tasks at once."""


def store_fault_message(exc: StoreUnavailableError, batch_id: int, rows: pa.Table) -> str:
    """One line for the operator: which batch, which store, why, and what to do next."""
    offsets = rows.column("offset").to_pylist() if rows.num_rows else []
    span = f"offsets {min(offsets)}..{max(offsets)}" if offsets else "no records"
    return (f"batch {batch_id} ({span}) was not committed: {exc}. Nothing of it was written. "
            f"{fault_advice(str(exc.path))}, then restart the projector: it resumes from the store's "
            "offsets.")


class ProjectorJob:
    """Streams the strata topics into a projection store.

    >>> job = ProjectorJob(spark, "localhost:9092", SqliteStore("store.db"), "checkpoint/")
    >>> query = job.start()  # doctest: +SKIP
    """

    def __init__(
        self,
        spark: SparkSession,
        bootstrap_servers: str,
        store: ProjectionWriter,
        checkpoint_dir: str | Path,
        *,
        kafka_options: Mapping[str, str] | None = None,
        max_offsets_per_trigger: int | None = MAX_OFFSETS_PER_TRIGGER,
        executor_store: str | None = None,
    ) -> None:
        self.executor_store = executor_store
        """The location of a store that takes a writer per task (PostgreSQL): each Kafka
        partition's records of a large batch (``EXECUTOR_BATCH_RECORDS``) are then folded and
        committed by the task that reads them, on an executor (``folding.fold_partitions``), and
        a small batch by the driver into ``store``. None: the driver folds every batch."""
        self._previous_records: int | None = None
        """The records of the previous batch; None before the first one."""
        self.max_offsets_per_trigger = max_offsets_per_trigger
        self.spark = spark
        self.bootstrap_servers = bootstrap_servers
        self.store = store
        self.checkpoint_dir = str(checkpoint_dir)
        self.kafka_options = source_options(kafka_options)
        self.store_fault: str | None = None
        """Set when a batch could not be written to the store: what happened and what to do."""
        self._folder = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="strata-fold")
        """Folds a batch decoded by the executors while Spark reads the next one."""
        self._folding: concurrent.futures.Future[None] | None = None

    def source(self) -> DataFrame:
        reader = (
            self.spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", self.bootstrap_servers)
            .option("subscribe", ",".join(TOPICS))
            .option("startingOffsets", starting_offsets(self.store.next_offsets()))
        )
        if self.max_offsets_per_trigger:
            # Safe for ordering: every command is in one partition, and the fold does not depend
            # on where batches end. Bounds each batch's memory: a burst or a replay comes in
            # batches of this many records.
            reader = reader.option("maxOffsetsPerTrigger", self.max_offsets_per_trigger)
        if self.executor_store is None:
            # A large batch is decoded by tasks of this many records at most, in order (a small
            # one by one task). Not when tasks fold and commit: each commits a partition's next
            # offset, so a partition's records must stay in one task.
            reader = reader.option("maxRecordsPerPartition", str(TASK_RECORDS))
        for key, value in self.kafka_options.items():
            # Kafka client settings (SASL, TLS, ...) in the Java client's names, kafka.-prefixed.
            reader = reader.option(key, value)
        return reader.load().select(*KAFKA_COLUMNS)

    def process(self, batch: DataFrame, batch_id: int) -> None:
        behind = self._previous_records is not None and self._previous_records >= EXECUTOR_BATCH_RECORDS
        if self.executor_store is not None and (behind or self._previous_records is None):
            self._previous_records = self._fold_on_executors(batch, batch_id, self.executor_store)
            return
        if behind:
            self._decode_on_executors(batch, batch_id)
            return
        self._finish_folding()
        started = time.perf_counter()
        rows = batch.toArrow()
        fetched = time.perf_counter()
        changes = self._fold(batch_id, rows, lambda: decode_batch(rows))
        self._previous_records = rows.num_rows
        self._log_batch(batch_id, rows.num_rows, changes, f"fetch {(fetched - started) * 1000:.0f} ms, fold "
                        f"and commit {(time.perf_counter() - fetched) * 1000:.0f} ms")

    def _fold(self, batch_id: int, rows: pa.Table, decoded: Callable[[], list[LogRecord]]) -> Changes:
        """Fold and commit ``decoded()``, the records of ``rows``; a store fault is kept in
        ``store_fault`` (said once) and raised."""
        try:
            with paused_gc():
                return apply_batch(self.store, decoded())
        except StoreUnavailableError as exc:
            # Raising fails the micro-batch (or the next one, for a batch folded while the next
            # was read), and the query stops: a restarted projector starts from the store's
            # offsets, so nothing of the batch is lost.
            self.store_fault = store_fault_message(exc, batch_id, rows)
            log.error("%s", self.store_fault)
            raise

    def _decode_on_executors(self, batch: DataFrame, batch_id: int) -> None:
        """Have the batch decoded by its tasks (``spark_streaming.decoding``) while the batch before
        is folded, then fold it in the folding thread: the next batch is read meanwhile."""
        started = time.perf_counter()
        decoded = parts_in_order(batch.mapInArrow(decode_partitions, PART).toArrow())
        fetched = time.perf_counter()
        self._finish_folding()
        waited = time.perf_counter()
        self._previous_records = decoded.num_rows

        def fold() -> None:
            changes = self._fold(batch_id, decoded, lambda: records(decoded))
            self._log_batch(batch_id, decoded.num_rows, changes,
                            f"decoded by tasks in {(fetched - started) * 1000:.0f} ms, waited "
                            f"{(waited - fetched) * 1000:.0f} ms for the batch before, fold and commit "
                            f"{(time.perf_counter() - waited) * 1000:.0f} ms")

        self._folding = self._folder.submit(fold)

    def _finish_folding(self) -> None:
        """Wait for the batch being folded in the folding thread; raise what its fold raised."""
        folding, self._folding = self._folding, None
        if folding is not None:
            folding.result()

    def fold_failed(self) -> bool:
        """Whether the fold of a batch decoded by the executors failed (the query is to stop)."""
        folding = self._folding
        return folding is not None and folding.done() and folding.exception() is not None

    def finish(self) -> None:
        """Wait for the last batch to be folded (after the query stops); raise what its fold raised."""
        try:
            self._finish_folding()
        finally:
            self._folder.shutdown(wait=True)

    @staticmethod
    def _log_batch(batch_id: int, records: int, changes: Changes, timing: str) -> None:
        statuses = changes.statuses()
        refused = sum(1 for status in statuses if status is not Status.ACCEPTED)
        log.info("batch %d: %d records, %d outcomes (%d not accepted), %d rejections; %s", batch_id,
                 records, len(statuses), refused, len(changes.rejections), timing)

    def _fold_on_executors(self, batch: DataFrame, batch_id: int, location: str) -> int:
        """Each Kafka partition of the batch folded and committed by its task; the records read."""
        started = time.perf_counter()
        summaries = batch.mapInArrow(fold_partitions(location), SUMMARY_SCHEMA).collect()
        done = time.perf_counter()
        for failed in summaries:
            if failed.fault is not None:
                # Failing the micro-batch keeps it out of Spark's checkpoint, as in the driver.
                self.store_fault = (
                    f"batch {batch_id} ({failed.topic}/{failed.partition} offsets "
                    f"{failed.first_offset}..{failed.last_offset}) was not committed: {failed.fault}. "
                    f"Nothing of that partition's records was written. {fault_advice(location)}, then "
                    "restart the projector: it resumes from the store's offsets.")
                log.error("%s", self.store_fault)
                raise RuntimeError(self.store_fault)
        log.info("batch %d: %d records of %d partitions, %d outcomes (%d not accepted), %d "
                 "rejections; folded and committed by tasks on %s in %.0f ms", batch_id,
                 sum(s.records for s in summaries), len(summaries),
                 sum(s.outcomes for s in summaries), sum(s.not_accepted for s in summaries),
                 sum(s.rejections for s in summaries),
                 ", ".join(sorted({f"{s.host} (pid {s.pid})" for s in summaries})) or "no host",
                 (done - started) * 1000)
        return sum(s.records for s in summaries)

    def start(self) -> StreamingQuery:
        """Start the streaming query from the store's next offsets.

        Spark's checkpoint is made afresh at each start (``<checkpoint_dir>/query``): a batch
        decoded by the executors is folded while Spark reads the next one, so Spark may count a
        batch done that the store has not committed yet, and only the store's offsets say where
        to start again. Records the store already holds are skipped by the fold."""
        checkpoint = Path(self.checkpoint_dir) / "query"
        shutil.rmtree(checkpoint, ignore_errors=True)
        # Spark writes its offset and commit logs in the background, at most once a second,
        # instead of twice per micro-batch on the batch's path (about 90 ms of a one-record batch);
        # the checkpoint is not what a restart starts from (above), which is why this sink may opt
        # out of Spark's check that only allows it for the Kafka sink.
        return (self.source().writeStream.foreachBatch(self.process)
                .option("checkpointLocation", str(checkpoint))
                .queryName("strata-projector")
                .option("asyncProgressTrackingEnabled", "true")
                .option("_asyncProgressTrackingOverrideSinkSupportCheck", "true")
                .start())
