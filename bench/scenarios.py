"""The benchmark scenarios. Each returns plain numbers (seconds, milliseconds, counts) and prints
progress; none asserts anything."""

from __future__ import annotations

import dataclasses
import io
import os
import sqlite3
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict, cast

import fastavro
import pyarrow as pa
from confluent_kafka import Consumer, TopicPartition
from datafusion import col, lit

from bench import procs
from bench.recordings import RecordingPool
from bench.systems import (
    SEND_CHUNK,
    ProbedServer,
    StrataSystem,
    System,
    layer_event,
    layer_templates,
    manifest,
    schema_event,
)
from changelog import CHANGES_TOPIC
from events import CATALOG_TOPIC, CreateDataset, Event, codec, encode
from producers import EventProducer
from projector import Changes, FoldReader, LogRecord, ProjectionReader, fold, open_store, wait_for_positions
from projector.batch_fold import fold_batch
from projector.stores.sql import SqlStore
from projector.stores.sql_schema import HISTORY_TABLES, TABLES
from projector.stores.sqlite import SqliteStore
from spark_streaming.decoding import decode_columns
from spark_streaming.decoding import records as made_records
from spark_streaming.folding import paused_gc

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from bench.profile import LogSummary, ProgressSummary
    from bench.systems import Dataset

WAIT_SECS = 1800


class Percentiles(TypedDict):
    calls: int
    p50_ms: float
    p90_ms: float
    p99_ms: float
    max_ms: float


def percentiles(values_ms: list[float]) -> Percentiles:
    ordered = sorted(values_ms)

    def at(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))], 2)

    return {"calls": len(ordered), "p50_ms": at(0.5), "p90_ms": at(0.9), "p99_ms": at(0.99),
            "max_ms": round(ordered[-1], 2)}


class StartupResult(TypedDict):
    start_s: float
    first_registration_visible_s: float
    idle_rss_mib: dict[str, float]
    first_read_s: float


def startup(system: System, pool: RecordingPool, *, idle_secs: float = 5.0) -> StartupResult:
    """Start the system on a new directory, register one recording and wait for it; then the
    idle memory; then stop it and construct it again on what it holds, until its first answered
    read."""
    started = time.perf_counter()
    start_secs = system.start()
    dataset = system.client.create_dataset("startup")
    dataset.register(pool.episodes(1)).wait()
    first_visible = time.perf_counter() - started
    time.sleep(idle_secs)
    memory = system.memory()
    return {"start_s": round(start_secs, 2), "first_registration_visible_s": round(first_visible, 2),
            "idle_rss_mib": memory, "first_read_s": round(system.first_read_s(), 2)}


class LatencyResult(Percentiles):
    samples_ms: NotRequired[list[float]]


def latency(system: System, pool: RecordingPool, *, calls: int, warmup: int) -> LatencyResult:
    """One ``register([uri]).wait()`` of a DROID-like episode at a time; the warm-up calls are
    not measured."""
    dataset = system.client.create_dataset("latency")
    measured = []
    for i, uri in enumerate(pool.episodes(calls + warmup)):
        started = time.perf_counter()
        dataset.register([uri]).wait()
        if i >= warmup:
            measured.append((time.perf_counter() - started) * 1000)
        if (i + 1) % 100 == 0:
            print(f"  {system.name}: {i + 1}/{calls + warmup} single registrations", flush=True)
    return {**percentiles(measured), "samples_ms": [round(x, 2) for x in measured]}


class SdkThroughputResult(TypedDict):
    datasets: int
    recordings: int
    batch: int
    rows_visible: int
    register_calls_s: float
    until_wait_s: float
    until_segment_table_s: float
    events_per_s: float


def sdk_throughput(system: System, pool: RecordingPool, *, datasets: int, count: int, batch: int
                   ) -> SdkThroughputResult:
    """``datasets`` datasets of ``count`` DROID-like episodes each (the same files in every
    dataset), registered in calls of ``batch`` URIs, all sent before waiting on any."""
    uris = pool.episodes(count)
    entries = [system.client.create_dataset(f"throughput-sdk-{d}") for d in range(datasets)]
    started = time.perf_counter()
    operations = [dataset.register(uris[i:i + batch]) for dataset in entries for i in range(0, count, batch)]
    sent = time.perf_counter() - started
    for operation in operations:
        operation.wait(timeout_secs=WAIT_SECS)
    waited = time.perf_counter() - started
    rows = sum(dataset.segment_table().to_arrow_table().num_rows for dataset in entries)
    visible = time.perf_counter() - started
    total = datasets * count
    print(f"  {system.name}: {datasets} x {count:,} recordings visible after {visible:.1f} s", flush=True)
    return {"datasets": datasets, "recordings": total, "batch": batch, "rows_visible": rows,
            "register_calls_s": round(sent, 2), "until_wait_s": round(waited, 2),
            "until_segment_table_s": round(visible, 2), "events_per_s": round(total / visible, 1)}


class ProducerThroughputResult(TypedDict):
    events: int
    rows_visible: int
    registration_bytes: int
    schema_bytes: list[int]
    send_s: float
    send_events_per_s: float
    until_projected_s: float
    projected_events_per_s: float
    segment_table_s: float
    until_segment_table_s: float
    events_per_s: float
    cpu_us_per_event: NotRequired[dict[str, float]]
    """CPU (user and system) of each process from the first send until every event is visible and
    the changelog has them all, in microseconds an event: this process (the pipeline's producer,
    and the read), the broker, and the projector's parts (``procs.projector_parts``)."""


def _stack_cpu(system: StrataSystem) -> dict[str, float]:
    """CPU seconds so far of this process and of the stack's processes, by part; empty for a
    server that does not say its pids."""
    server = system.server
    if not isinstance(server, ProbedServer):
        return {}
    roots = server.process_roots()
    parts = {"producer": [os.getpid()], "broker": procs.tree(roots["broker"]),
             **procs.projector_parts(roots["projector"])}
    return {name: procs.cpu_seconds(pids) for name, pids in parts.items()}


def _changelog_settled(system: StrataSystem, *, quiet_secs: float = 2.0, timeout_secs: float = 120.0) -> None:
    """Wait until the changelog topic's end offset has not moved for ``quiet_secs``: the relay has
    published what the projector committed."""
    deadline = time.monotonic() + timeout_secs
    published = topic_end_offset(system.server.bootstrap_servers, CHANGES_TOPIC)
    while time.monotonic() < deadline:
        time.sleep(quiet_secs)
        now = topic_end_offset(system.server.bootstrap_servers, CHANGES_TOPIC)
        if now == published:
            return
        published = now


def producer_throughput(system: StrataSystem, pool: RecordingPool, *, count: int) -> ProducerThroughputResult:
    """``count`` RegisterLayer events of DROID-like episodes, built and sent with
    ``producers.EventProducer`` as a data pipeline would (its schemas defined once, first), then
    read back through ``segment_table()``. Also the mean size of one registration event."""
    dataset = system.client.create_dataset("throughput-pipeline")
    definitions, templates = layer_templates({"base": pool.episodes(1)[0]})
    uri_prefix = pool.directory.as_uri()
    sample = [layer_event(dataset.id, templates["base"], i, f"{uri_prefix}/pipeline/{i}.rrd")
              for i in range(1_000)]
    registration_bytes = statistics.mean(len(encode(event)) for event in sample)
    producer = EventProducer(system.server.bootstrap_servers)
    cpu_before = _stack_cpu(system)
    started = time.perf_counter()
    try:
        producer.send([schema_event(dataset.id, d) for d in definitions])
        for start in range(0, count, SEND_CHUNK):
            events = [layer_event(dataset.id, templates["base"], i, f"{uri_prefix}/pipeline/{i}.rrd")
                      for i in range(start, min(start + SEND_CHUNK, count))]
            last = producer.send(events)[-1]
            done = start + len(events)
            if done % 100_000 < SEND_CHUNK or done == count:
                at = system.store.next_offsets().get((CATALOG_TOPIC, 0), 0)
                print(f"  strata: {done:,}/{count:,} events sent ({time.perf_counter() - started:.0f} s, "
                      f"store at offset {at:,})", flush=True)
    finally:
        producer.close()
    sent = time.perf_counter() - started
    wait_for_positions(system.store, [last], WAIT_SECS)
    projected = time.perf_counter() - started
    table_started = time.perf_counter()
    rows = dataset.segment_table().to_arrow_table().num_rows
    visible = time.perf_counter() - started
    print(f"  strata: {count:,} events projected after {projected:.1f} s, in segment_table() after "
          f"{visible:.1f} s", flush=True)
    _changelog_settled(system)
    cpu = {name: round((used - cpu_before[name]) / count * 1e6, 1)
           for name, used in _stack_cpu(system).items()}
    result: ProducerThroughputResult = {
        "events": count, "rows_visible": rows,
        "registration_bytes": round(registration_bytes),
        "schema_bytes": [len(d.arrow_schema) for d in definitions], "send_s": round(sent, 2),
        "send_events_per_s": round(count / sent, 1), "until_projected_s": round(projected, 2),
        "projected_events_per_s": round(count / projected, 1),
        "segment_table_s": round(time.perf_counter() - table_started, 2),
        "until_segment_table_s": round(visible, 2), "events_per_s": round(count / visible, 1)}
    if cpu:
        result["cpu_us_per_event"] = cpu
    return result


class QueryResult(TypedDict):
    fill_s: float
    segment_rows: int
    manifest_rows: int
    segment_table_ms: float
    manifest_ms: float


def queries(system: System, pool: RecordingPool, *, sizes: list[int], repeats: int) -> dict[str, QueryResult]:
    """For each size, a dataset of that many segments x 3 layers; then ``segment_table()`` and
    ``manifest()`` materialised with ``to_arrow_table()``, median of ``repeats`` runs."""
    results: dict[str, QueryResult] = {}
    for size in sizes:
        dataset = system.client.create_dataset(f"queries-{size}")
        started = time.perf_counter()
        system.fill(dataset, pool, size)
        fill_s = time.perf_counter() - started
        segment_ms, manifest_ms = [], []
        for _ in range(repeats):
            began = time.perf_counter()
            segments = dataset.segment_table().to_arrow_table()
            segment_ms.append((time.perf_counter() - began) * 1000)
            began = time.perf_counter()
            layers = manifest(dataset)
            manifest_ms.append((time.perf_counter() - began) * 1000)
        results[str(size)] = {
            "fill_s": round(fill_s, 2), "segment_rows": segments.num_rows, "manifest_rows": layers.num_rows,
            "segment_table_ms": round(statistics.median(segment_ms), 1),
            "manifest_ms": round(statistics.median(manifest_ms), 1)}
        print(f"  {system.name}: {size:,} segments: {results[str(size)]}", flush=True)
    return results


def topic_end_offset(bootstrap_servers: str, topic: str = CATALOG_TOPIC) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap_servers, "group.id": "strata-bench"})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1]
    finally:
        consumer.close()


class ReplayResult(TypedDict):
    events: int
    max_offsets_per_trigger: int
    startup_s: float
    replay_s: float
    events_per_s: float
    events_per_s_with_startup: float
    peak_rss_mib: float
    event_log_dir: str
    profile: NotRequired[ProgressSummary]
    log_profile: NotRequired[LogSummary]


def replay(bootstrap: str, directory: Path, *, max_offsets: int, store: str | None = None,
           projector_args: tuple[str, ...] = ()) -> ReplayResult:
    """Rebuild the projection of the whole topic on ``bootstrap`` from offset 0 into a fresh store
    (``store``, an empty PostgreSQL database's URL, or a SQLite file in ``directory``) and
    checkpoint, with the real projector in a subprocess (given ``projector_args`` too); peak RSS
    of its process tree from /proc."""
    end = topic_end_offset(bootstrap)
    directory.mkdir(parents=True)
    store_path, ready = store or str(directory / "store.db"), directory / "ready"
    event_log = directory / "spark-events"
    args = [sys.executable, "-m", "bench.probe", "--event-log-dir", str(event_log),
            "--bootstrap-servers", bootstrap, "--store", str(store_path),
            "--checkpoint", str(directory / "checkpoint"), "--ready-file", str(ready),
            "--max-offsets-per-trigger", str(max_offsets), *projector_args]
    print(f"  strata: replaying {end:,} events (maxOffsetsPerTrigger {max_offsets or 'no limit'})",
          flush=True)
    with open(directory / "projector.log", "wb") as log:
        process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT,
                                   env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"})
    try:
        with procs.PeakRss([process.pid]) as peak:
            started = time.perf_counter()
            startup_s = procs.wait_until(ready.exists, timeout_secs=300, what="projector start")
            replayed = open_store(store_path, read_only=True)
            try:
                caught_up = procs.wait_until(lambda: _replayed(process, replayed, end, directory),
                                             timeout_secs=WAIT_SECS, interval_secs=0.2, what="replay end")
            finally:
                replayed.close()
            total = time.perf_counter() - started
    finally:
        process.terminate()
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    print(f"  strata: replayed {end:,} events in {caught_up:.1f} s after a {startup_s:.1f} s start",
          flush=True)
    return {"events": end, "max_offsets_per_trigger": max_offsets, "startup_s": round(startup_s, 2),
            "replay_s": round(caught_up, 2), "events_per_s": round(end / caught_up, 1),
            "events_per_s_with_startup": round(end / total, 1), "peak_rss_mib": procs.mib(peak.peak_bytes),
            "event_log_dir": str(event_log)}


def _replayed(process: subprocess.Popen[bytes], store: SqlStore, end: int, directory: Path) -> bool:
    if process.poll() is not None:
        raise RuntimeError(f"the replaying projector exited with code {process.returncode} at offset "
                           f"{store.next_offset(CATALOG_TOPIC, 0):,}; see {directory / 'projector.log'}")
    return store.next_offset(CATALOG_TOPIC, 0) >= end


class KafkaReadResult(TypedDict):
    events: int
    batch: int
    mean_record_bytes: int
    count_events_per_s: float
    arrow_events_per_s: float
    codec_records_events_per_s: float


def kafka_read(bootstrap: str, *, batch: int) -> KafkaReadResult:
    """Spark's Kafka source alone: the whole topic, from offset 0, in batch queries of ``batch``
    offsets with the projector's Kafka options, as a replay's micro-batches read it. Read three
    times: counted in the JVM; handed to Python as Arrow (``toArrow()``, what
    ``ProjectorJob.process`` does); and that, decoded into the fold's records as the projector
    decodes them. The ceilings of replay's rate on this machine, without and with decoding."""
    from pyspark.sql import DataFrame
    from pyspark.sql import functions as F

    from spark_streaming.folding import KAFKA_COLUMNS, decode_batch
    from spark_streaming.job import DEFAULT_KAFKA_OPTIONS, build_session

    end = topic_end_offset(bootstrap)
    spark = build_session(app_name="strata-bench-kafka-read")

    def between(start: int) -> DataFrame:
        reader = (spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap)
                  .option("assign", f'{{"{CATALOG_TOPIC}": [0]}}')
                  .option("startingOffsets", f'{{"{CATALOG_TOPIC}": {{"0": {start}}}}}')
                  .option("endingOffsets", f'{{"{CATALOG_TOPIC}": {{"0": {min(start + batch, end)}}}}}'))
        for key, value in DEFAULT_KAFKA_OPTIONS.items():
            reader = reader.option(key, value)
        return reader.load()

    def raw(start: int) -> pa.Table:
        return between(start).select(*KAFKA_COLUMNS).toArrow()

    try:
        between(0).agg(F.count("*")).first()  # untimed: the JVM's first queries plan and compile
        raw(0)
        print(f"  strata: Spark reads {end:,} events in batches of {batch:,}, counting in the JVM",
              flush=True)
        started, records, value_bytes = time.perf_counter(), 0, 0
        for start in range(0, end, batch):
            [row] = between(start).agg(F.count("*"), F.sum(F.length("value"))).collect()
            records, value_bytes = records + row[0], value_bytes + row[1]
        counted_s = time.perf_counter() - started
        rates = {}
        for name, read in [("arrow", raw), ("codec_records", lambda start: decode_batch(raw(start)))]:
            print(f"  strata: ... and again: {name.replace('_', ' ')}", flush=True)
            started = time.perf_counter()
            with paused_gc():  # as the projector decodes
                for start in range(0, end, batch):
                    read(start)
            rates[f"{name}_events_per_s"] = round(records / (time.perf_counter() - started), 1)
    finally:
        spark.stop()
    return {"events": records, "batch": batch, "mean_record_bytes": round(value_bytes / records),
            "count_events_per_s": round(records / counted_s, 1),
            "arrow_events_per_s": rates["arrow_events_per_s"],
            "codec_records_events_per_s": rates["codec_records_events_per_s"]}


STAGES = ("decode", "records", "batch_view", "fold", "commit")
"""``decode`` is the share of Spark's tasks (``spark_streaming.decoding.decode_columns``), the rest
the driver's: it makes the fold's records of the tasks' columns, then views, folds and commits."""


class Floors(TypedDict):
    avro_body: float
    sqlite_rows: float


class StagesResult(TypedDict):
    events: int
    batch: int
    us_per_event: dict[str, float]
    total_us_per_event: float
    events_per_s: float
    per_record_fold_us_per_event: dict[str, float]
    per_record_fold_events_per_s: float
    floor_us_per_event: Floors


def stages(pool: RecordingPool, directory: Path, *, events: int, batch: int) -> StagesResult:
    """The projector's Python work per event, stage by stage, without Spark or Kafka: ``events``
    register events of DROID-like episodes (their schemas defined first) are encoded, then
    decoded, folded and committed into a fresh SQLite store in batches of ``batch``, as
    ``strata replay`` does after its read (into a store it loads), with the garbage collector
    paused as there. Twice, into two stores: folded by the batch fold, as the projector folds, and
    by the fold one record at a time, its specification. CPU time of this process
    (``time.process_time``), so other load on the machine counts less."""
    definitions, templates = layer_templates({"base": pool.episodes(1)[0]})
    dataset_id = uuid.uuid4()
    records = [encode(Event(dataset_id, CreateDataset("stages")))]
    records += [encode(schema_event(dataset_id, d)) for d in definitions]
    records += [encode(layer_event(dataset_id, templates["base"], i, f"file:///stages/{i}.rrd"))
                for i in range(events)]
    directory.mkdir(parents=True)
    spent = _staged(records, directory / "store.db", batch, fold_batch)
    spec = _staged(records, directory / "per-record.db", batch, fold)
    total, spec_total = sum(spent.values()), sum(spec.values())
    result: StagesResult = {
        "events": len(records), "batch": batch,
        "us_per_event": {stage: round(seconds / len(records) * 1e6, 1) for stage, seconds in spent.items()},
        "total_us_per_event": round(total / len(records) * 1e6, 1),
        "events_per_s": round(len(records) / total, 1),
        "per_record_fold_us_per_event": {stage: round(spec[stage] / len(records) * 1e6, 1)
                                         for stage in ("fold", "commit")},
        "per_record_fold_events_per_s": round(len(records) / spec_total, 1),
        "floor_us_per_event": _floors(records[1 + len(definitions):], directory, batch)}
    print(f"  strata: {result}", flush=True)
    return result


def _staged(records: list[bytes], path: Path, batch: int,
            folder: Callable[[FoldReader, Sequence[LogRecord]], Changes]) -> dict[str, float]:
    """CPU seconds of each of ``STAGES`` for ``records`` decoded, folded by ``folder`` and
    committed into a fresh SQLite store at ``path`` in batches of ``batch``."""
    store = SqliteStore(path, loading=True)
    spent = dict.fromkeys(STAGES, 0.0)
    try:
        with paused_gc():
            for start in range(0, len(records), batch):
                values = records[start:start + batch]
                rows = pa.table({"topic": [CATALOG_TOPIC] * len(values),
                                 "partition": pa.array([0] * len(values), pa.int32()),
                                 "offset": pa.array(range(start, start + len(values)), pa.int64()),
                                 "value": pa.array(values, pa.binary())})
                began = time.process_time()
                columns = decode_columns(rows)
                decoded_at = time.process_time()
                decoded = made_records(columns)
                made_at = time.process_time()
                offsets = store.next_offsets()
                view = store.batch_view(decoded)
                viewed_at = time.process_time()
                changes = folder(view, decoded)
                folded_at = time.process_time()
                store.commit(changes, expected_offsets=offsets)
                committed_at = time.process_time()
                times = (began, decoded_at, made_at, viewed_at, folded_at, committed_at)
                for stage, before, after in zip(STAGES, times, times[1:], strict=False):
                    spent[stage] += after - before
    finally:
        store.close()
    return spent


class _RegisterBody(TypedDict):
    """The fields of a register event's Avro body read here: the body is the envelope, its
    command a ``RegisterLayer`` record."""

    dataset_id: uuid.UUID
    event_id: uuid.UUID
    command: dict[str, Any]


def _floors(records: list[bytes], directory: Path, batch: int) -> Floors:
    """CPU per register event of the two steps no fold can avoid while events are decoded and
    rows written in Python: fastavro reading the Avro body alone (no model objects), and SQLite
    inserting the rows one accepted registration writes (a layer, a segment, an outcome) with one
    ``executemany`` per table and batch, into the store's own tables and indexes."""
    writer = codec.SCHEMAS[codec.SCHEMA_VERSION]
    with paused_gc():
        began = time.process_time()
        bodies = [cast(_RegisterBody, fastavro.schemaless_reader(  # the envelope record
            io.BytesIO(value[codec.HEADER_SIZE:]), writer, None)) for value in records]
        avro_s = time.process_time() - began
    dataset_id = str(bodies[0]["dataset_id"])
    rows: dict[str, list[dict[str, object]]] = {"layers": [], "segments": [], "outcomes": []}
    for offset, body in enumerate(bodies):
        command, event_id = body["command"], str(body["event_id"])
        at = {"topic": CATALOG_TOPIC, "partition": 0, "offset": offset}
        rows["layers"].append({
            **{name: command[name] for name in ("segment_id", "layer_name", "storage_url", "size_bytes",
                                                "schema_sha256", "num_chunks", "properties_schema_sha256",
                                                "properties_batch")},
            **{f"registered_{key}": value for key, value in at.items()},
            "dataset_id": dataset_id, "properties": b"", "registered_at": 0, "event_id": event_id,
            "index_ranges": "[]"})
        rows["segments"].append({"dataset_id": dataset_id, "segment_id": command["segment_id"],
                                 **{f"created_{key}": value for key, value in at.items()},
                                 "updated_at": 0, "position": offset})
        rows["outcomes"].append({"event_id": event_id, **at, "status": "accepted", "reason": ""})
    # In the store's column order: a column the store gains and this misses is a KeyError here.
    values = {table: [tuple(row[column] for column in TABLES[table][0]) for row in table_rows]
              for table, table_rows in rows.items()}
    SqliteStore(directory / "floor.db").close()  # the store's tables and indexes, empty
    connection = sqlite3.connect(directory / "floor.db")
    try:
        began = time.process_time()
        for start in range(0, len(records), batch):
            with connection:
                for table, table_values in values.items():
                    columns = TABLES[table][0]
                    connection.executemany(
                        f"insert into {table} ({', '.join(columns)}) "
                        f"values ({', '.join('?' * len(columns))})", table_values[start:start + batch])
        insert_s = time.process_time() - began
    finally:
        connection.close()
    return {"avro_body": round(avro_s / len(records) * 1e6, 1),
            "sqlite_rows": round(insert_s / len(records) * 1e6, 1)}


class ReadResult(TypedDict):
    rows: int
    columns: int
    bytes: int
    scan_s: float
    first_scan_s: float
    rows_per_s: float
    one_segment: Percentiles


def reads(system: System, pool: RecordingPool, *, sizes: list[int], calls: int) -> dict[str, ReadResult]:
    """``reader(index="real_time")`` over whole datasets of DROID-like episodes materialised to
    Arrow (rows/s, the median of three scans), and one segment by a ``rerun_segment_id`` filter
    (latency per call)."""
    uris = pool.episodes(max(sizes))
    results: dict[str, ReadResult] = {}
    for size in sizes:
        dataset = system.client.create_dataset(f"reads-{size}")
        dataset.register(uris[:size]).wait(timeout_secs=WAIT_SECS)
        ids = dataset.segment_ids()

        def one(segment_id: str, dataset: Dataset = dataset) -> pa.Table:
            return pa.table(dataset.reader(index="real_time")
                            .filter(col("rerun_segment_id") == lit(segment_id)))

        one(ids[0])  # warm-up of the code paths
        scans = []
        for _ in range(3):
            started = time.perf_counter()
            table = pa.table(dataset.reader(index="real_time"))
            scans.append(time.perf_counter() - started)
        scan_s = statistics.median(scans)
        latencies = []
        for i in range(calls):
            started = time.perf_counter()
            one(ids[(i * 7) % len(ids)])
            latencies.append((time.perf_counter() - started) * 1000)
        print(f"  {system.name}: {size} segments, {table.num_rows:,} rows in {scan_s:.2f} s; one segment "
              f"p50 {statistics.median(latencies):.1f} ms", flush=True)
        results[str(size)] = {"rows": table.num_rows, "columns": table.num_columns, "bytes": table.nbytes,
                              "scan_s": round(scan_s, 3), "first_scan_s": round(scans[0], 3),
                              "rows_per_s": round(table.num_rows / scan_s, 1),
                              "one_segment": percentiles(latencies)}
    return results


class WorkersResult(TypedDict):
    rows: int
    scan_s: float
    rows_per_s: float
    caller_peak_rss_mib: float
    workers_peak_rss_mib: float
    files: int
    register_read_s: float
    register_s: float
    registrations_per_s: float


def worker_scaling(system: StrataSystem, pool: RecordingPool, *, segments: int, files: int,
                   sizes: tuple[int, ...] = (0, 1, 2)) -> dict[str, WorkersResult]:
    """For clients of each size of worker pool (0: in the client's process): a full
    ``reader(index="real_time")`` scan of ``segments`` DROID-like episodes to Arrow (median of
    three, workers already started) with the peak RSS of the client and of its workers, and one
    ``register()`` call of ``files`` episodes into a new dataset until ``wait()`` returns."""
    uris = pool.episodes(max(segments, files))
    name = f"scaling-{segments}"
    system.client.create_dataset(name).register(uris[:segments]).wait(timeout_secs=WAIT_SECS)
    results: dict[str, WorkersResult] = {}
    for size in sizes:
        client = system.server.client(workers=size)
        dataset = client.get_dataset(name)
        pa.table(dataset.reader(index="real_time"))  # starts the workers
        procs.wait_until(lambda: len(client.worker_pids) == size, timeout_secs=60,  # noqa: B023
                         what=f"{size} workers serving")
        scans = []
        with procs.PeakRss([os.getpid()], trees=False, interval_secs=0.02) as caller_rss, \
                procs.PeakRss(client.worker_pids, trees=False, interval_secs=0.02) as workers_rss:
            for _ in range(3):
                started = time.perf_counter()
                table = pa.table(dataset.reader(index="real_time"))
                scans.append(time.perf_counter() - started)
        scan_s = statistics.median(scans)
        target = client.create_dataset(f"scaling-register-{size}")
        started = time.perf_counter()
        operation = target.register(uris[:files])
        read_s = time.perf_counter() - started
        operation.wait(timeout_secs=WAIT_SECS)
        register_s = time.perf_counter() - started
        client.close()
        print(f"  strata, {size} workers: {table.num_rows:,} rows in {scan_s:.2f} s; {files:,} files "
              f"registered in {register_s:.2f} s", flush=True)
        results[str(size)] = {
            "rows": table.num_rows, "scan_s": round(scan_s, 3),
            "rows_per_s": round(table.num_rows / scan_s, 1),
            "caller_peak_rss_mib": procs.mib(caller_rss.peak_bytes),
            "workers_peak_rss_mib": procs.mib(workers_rss.peak_bytes), "files": files,
            "register_read_s": round(read_s, 2), "register_s": round(register_s, 2),
            "registrations_per_s": round(files / register_s, 1)}
    return results


class SparkReadResult(TypedDict):
    segments: int
    rows: int
    seconds: float
    rows_per_s: float
    segments_per_s: float


def spark_read(system: StrataSystem, pool: RecordingPool, *, segments: int) -> SparkReadResult:
    """``to_spark(spark, "real_time").count()`` over ``segments`` DROID-like episodes with Spark
    ``local[*]`` in this process: a partition per segment, read on the executors."""
    from pyspark.sql import SparkSession

    uris = pool.episodes(segments)
    dataset = system.client.create_dataset(f"spark-{segments}")
    for start in range(0, segments, 1000):
        dataset.register(uris[start:start + 1000]).wait(timeout_secs=WAIT_SECS)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    spark = (SparkSession.builder.master("local[*]").appName("strata-bench-read")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    try:
        dataset.filter_segments(dataset.segment_ids()[:2]).to_spark(spark, "real_time").count()  # warm-up
        started = time.perf_counter()
        rows = dataset.to_spark(spark, "real_time").count()
        seconds = time.perf_counter() - started
    finally:
        spark.stop()
    print(f"  strata: Spark read {segments:,} segments, {rows:,} rows in {seconds:.1f} s", flush=True)
    return {"segments": segments, "rows": rows, "seconds": round(seconds, 2),
            "rows_per_s": round(rows / seconds, 1), "segments_per_s": round(segments / seconds, 1)}


TABLE_INDEX = {b"rerun:is_table_index": b"true"}
TABLE_SCHEMA = pa.schema(
    [pa.field("id", pa.int64(), nullable=False, metadata=TABLE_INDEX)]
    + [pa.field(f"value_{i}", pa.float64()) for i in range(3)]
    + [pa.field(f"count_{i}", pa.int64()) for i in range(3)]
    + [pa.field(f"label_{i}", pa.string()) for i in range(3)])
"""Ten columns, like a table of job status or labels: the index, numbers and short strings."""


def _table_rows(start: int, count: int) -> pa.RecordBatch:
    ids = pa.array(range(start, start + count), pa.int64())
    columns = [ids] + [pa.array([float(i) * 0.5 + k for i in range(start, start + count)]) for k in range(3)]
    columns += [pa.array([i * 3 + k for i in range(start, start + count)], pa.int64()) for k in range(3)]
    columns += [pa.array([f"label-{k}-{i % 1000}" for i in range(start, start + count)]) for k in range(3)]
    return pa.RecordBatch.from_arrays(columns, schema=TABLE_SCHEMA)


class TablesResult(TypedDict):
    rows: int
    batch: int
    append_s: float
    append_sent_s: float
    append_rows_per_s: float
    append_call: Percentiles
    upserts: int
    upsert_rows_per_s: float | None
    upsert_call: Percentiles | None
    read_rows: int
    read_s: float
    read_rows_per_s: float
    write_then_read: Percentiles


def tables(system: System, *, rows: int, batch: int, upserts: int, round_trips: int = 50) -> TablesResult:
    """A 10-column table: ``append`` of ``rows`` rows in calls of ``batch``, then one ``reader()``
    that sees them all (rows/s end to end); ``upserts`` single-row ``upsert`` calls (every other
    one replaces an existing row, the others add one), then one read that sees them all; then
    ``reader()`` of the whole table to Arrow (median of three); then ``round_trips`` times one
    single-row append followed by a ``reader()`` count (write then read). Per call: p50/p99 (ms)."""
    table = system.client.create_table(f"bench_{uuid.uuid4().hex[:8]}", TABLE_SCHEMA)
    batches = [_table_rows(start, min(batch, rows - start)) for start in range(0, rows, batch)]
    appends = []
    started = time.perf_counter()
    for number, data in enumerate(batches, 1):
        call = time.perf_counter()
        table.append(data)
        appends.append((time.perf_counter() - call) * 1000)
        if number % 20 == 0:
            print(f"  {system.name}: appended {number * batch:,} rows", flush=True)
    sent_s = time.perf_counter() - started
    seen = table.reader().count()
    append_s = time.perf_counter() - started
    assert seen == rows, f"the read after the appends saw {seen:,} rows of {rows:,}"
    singles = [_table_rows(rows + i if i % 2 else (i * 7919) % rows, 1) for i in range(upserts)]
    upsert_ms = []
    started = time.perf_counter()
    for data in singles:
        call = time.perf_counter()
        table.upsert(data)
        upsert_ms.append((time.perf_counter() - call) * 1000)
    seen = table.reader().count()
    upsert_s = time.perf_counter() - started
    expected = rows + upserts // 2
    assert seen == expected, f"the read after the upserts saw {seen:,} rows of {expected:,}"
    scans = []
    for _ in range(3):
        call = time.perf_counter()
        read = table.reader().to_arrow_table()
        scans.append(time.perf_counter() - call)
    scan_s = statistics.median(scans)
    trips = []
    for i in range(round_trips):
        call = time.perf_counter()
        table.append(_table_rows(rows + upserts + i, 1))
        count = table.reader().count()
        trips.append((time.perf_counter() - call) * 1000)
        assert count == expected + i + 1, f"a read after its append saw {count:,} rows"
    print(f"  {system.name}: append {rows / append_s:,.0f} rows/s end to end ({rows / sent_s:,.0f} rows/s "
          f"sent), upsert {upserts / upsert_s:,.1f} rows/s end to end, read {read.num_rows / scan_s:,.0f} "
          f"rows/s, write then read p50 {statistics.median(trips):.1f} ms", flush=True)
    return {"rows": rows, "batch": batch, "append_s": round(append_s, 2), "append_sent_s": round(sent_s, 2),
            "append_rows_per_s": round(rows / append_s, 1), "append_call": percentiles(appends),
            "upserts": upserts, "upsert_rows_per_s": round(upserts / upsert_s, 1) if upserts else None,
            "upsert_call": percentiles(upsert_ms) if upserts else None,
            "read_rows": read.num_rows, "read_s": round(scan_s, 3),
            "read_rows_per_s": round(read.num_rows / scan_s, 1),
            "write_then_read": percentiles(trips)}


HISTORY_LAYERS = ("base", "quality", "derived")


class HistoryResult(TypedDict):
    segments: int
    layers: int
    replacements: int
    events: int
    fold_commit_events_per_s: float
    now: dict[str, float]
    """Per read (``segment_table``, ``manifest``): its median ``<read>_ms`` and its ``<read>_rows``."""
    as_of_middle: dict[str, float]
    without_history: dict[str, float]
    store_mb: float
    store_without_history_mb: float


def history(pool: RecordingPool, directory: Path, *, segments: int, replacements: int,
            batch: int = 10_000, repeats: int = 3) -> HistoryResult:
    """What keeping the catalog's past costs, in process (no Spark or Kafka): a dataset of
    ``segments`` DROID-like segments of 3 layers, then ``replacements`` re-registrations of
    random layers (``on_duplicate="replace"``), folded and committed into SQLite in batches of
    ``batch``. Then ``segment_table()`` and ``manifest()`` as the SDK builds them (median of
    ``repeats``), now and as of the offset halfway through the replacements; and the store's size
    with its history and without (the history tables emptied, then ``VACUUM``: the store as it was
    before history was kept), with the current reads timed on that copy too."""
    import random
    import shutil

    from events import OnDuplicate
    from projector import apply_batch, views

    definitions, templates = layer_templates({"base": pool.episodes(1)[0]})
    dataset_id = uuid.uuid4()
    events = [Event(dataset_id, CreateDataset("history")),
              *(schema_event(dataset_id, d) for d in definitions)]
    for i in range(segments):
        for layer in HISTORY_LAYERS:
            events.append(layer_event(dataset_id, dataclasses.replace(templates["base"], layer_name=layer), i,
                                      f"file:///history/{i}/{layer}.rrd"))
    middle = len(events) + replacements // 2
    draw = random.Random(0)
    for n in range(replacements):
        i, layer = draw.randrange(segments), HISTORY_LAYERS[n % len(HISTORY_LAYERS)]
        replacing = dataclasses.replace(templates["base"], layer_name=layer, on_duplicate=OnDuplicate.REPLACE)
        events.append(layer_event(dataset_id, replacing, i, f"file:///history/{i}/{layer}-v{n}.rrd"))
    records = [LogRecord.from_kafka(CATALOG_TOPIC, 0, offset, encode(event))
               for offset, event in enumerate(events)]
    directory.mkdir(parents=True)
    path = directory / "store.db"
    store = SqliteStore(path)
    began = time.process_time()
    with paused_gc():
        for start in range(0, len(records), batch):
            apply_batch(store, records[start:start + batch])
            if (start // batch) % 10 == 9:
                print(f"  history: {start + batch:,}/{len(records):,} events folded", flush=True)
    fold_s = time.process_time() - began

    def reads(reader: ProjectionReader) -> dict[str, float]:
        def segment_table() -> int:
            return int(views.dataset_segment_table(reader, dataset_id).num_rows)

        def manifest_rows() -> int:
            layers = reader.layer_table(dataset_id)
            return int(views.manifest_table(layers, views.property_schemas(reader, layers)).num_rows)

        timings: dict[str, float] = {}
        for name, read in (("segment_table", segment_table), ("manifest", manifest_rows)):
            seconds = []
            for _ in range(repeats):
                started = time.perf_counter()
                rows = read()
                seconds.append(time.perf_counter() - started)
            timings[f"{name}_ms"] = round(statistics.median(seconds) * 1000, 1)
            timings[f"{name}_rows"] = rows
        return timings

    now, then = reads(store), reads(store.at(middle))
    store.close()
    size_with = _sqlite_size(path)
    bare = directory / "without-history.db"
    shutil.copy(path, bare)
    connection = sqlite3.connect(bare)
    for table in HISTORY_TABLES:
        connection.execute(f"delete from {table}")
    connection.commit()
    connection.execute("vacuum")
    connection.close()
    bare_store = SqliteStore(bare)
    before = reads(bare_store)
    bare_store.close()
    result: HistoryResult = {
        "segments": segments, "layers": segments * len(HISTORY_LAYERS), "replacements": replacements,
        "events": len(records), "fold_commit_events_per_s": round(len(records) / fold_s, 1),
        "now": now, "as_of_middle": then, "without_history": before,
        "store_mb": round(size_with / 2**20, 1),
        "store_without_history_mb": round(_sqlite_size(bare) / 2**20, 1)}
    print(f"  strata: {result}", flush=True)
    return result


def _sqlite_size(path: Path) -> int:
    return sum(p.stat().st_size for p in (path, path.with_name(path.name + "-wal")) if p.exists())
