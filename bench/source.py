"""``python -m bench.source``: the ceiling of Spark's Kafka source on this machine, and where its
CPU goes.

A broker of its own gets ``--events`` DROID-like registrations (``bench.rebuild.log_events``: a
dataset, its schemas, then new layers). Spark then reads the whole topic from offset 0 in batch
queries of each size of ``--batches`` offsets, each split into contiguous tasks (the Kafka
source's ``minPartitions``; each count of ``--tasks`` in turn), four ways:

  count     counted in the JVM: the source and nothing else
  arrow     handed to the driver's Python as Arrow (``toArrow()``, what the projector does now)
  decoded   the same, then decoded in the driver into the fold's records (the projector's codec)
  tasks     decoded by the tasks themselves, in Spark's Python workers (``mapInArrow``), each
            answering one row: the driver gets nothing but counts

For each, the events per second, and the CPU of the broker, of Spark's JVM, of its Python
workers and of this (the driver's) Python process, from ``/proc``, in cores (CPU seconds per
second of the read). Results go to ``bench/results/<day>-source.{md,json}``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa

from bench import procs
from bench.rebuild import _produce, log_events
from bench.recordings import RecordingPool
from events import CATALOG_TOPIC
from producers import EventProducer, end_offsets, ensure_topics
from spark_streaming.folding import KAFKA_COLUMNS, decode_batch, paused_gc
from stack.broker import EmbeddedBroker

RESULTS_DIR = Path(__file__).resolve().parent / "results"
WAYS = ("count", "arrow", "decoded", "tasks")
class Processes:
    """The processes whose CPU a read is charged to, found again at each reading (Spark starts
    its Python workers on demand)."""

    def __init__(self, broker: int) -> None:
        self.broker = broker

    def groups(self) -> dict[str, list[int]]:
        own = os.getpid()
        jvms = [pid for pid in procs.tree(own) if pid != own and procs.program(pid).startswith("java")]
        workers = [pid for jvm in jvms for pid in procs.tree(jvm) if pid != jvm]
        return {"broker": procs.tree(self.broker), "spark_jvm": jvms, "python_workers": workers,
                "driver_python": [own]}

    def reading(self) -> dict[str, float]:
        return {name: procs.cpu_seconds(pids) for name, pids in self.groups().items()}


def _decoded_in_task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """A task's Kafka rows decoded into the fold's records, answered as one row: how many."""
    rows = pa.Table.from_batches(list(batches))
    if not rows.num_rows:
        return
    with paused_gc():
        records = decode_batch(rows)
    yield pa.RecordBatch.from_pylist([{"records": len(records), "pid": os.getpid()}])


def measure(bootstrap: str, broker_pid: int, *, batches: list[int], tasks: list[int], end: int
            ) -> dict[str, Any]:
    """Every way of ``WAYS`` in batches of each size of ``batches`` split into each count of
    ``tasks``, by ``"<way>, <batch> x <tasks>"``; and the records' mean size in bytes."""
    from pyspark.sql import DataFrame
    from pyspark.sql import functions as F

    from spark_streaming.job import DEFAULT_KAFKA_OPTIONS, build_session

    spark = build_session(app_name="strata-bench-source")
    spark.sparkContext.setLogLevel("ERROR")  # each batch query opens consumers of its own: the pool warns

    batch, split = batches[0], tasks[0]

    def between(start: int) -> DataFrame:
        reader = (spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap)
                  .option("assign", f'{{"{CATALOG_TOPIC}": [0]}}')
                  .option("startingOffsets", f'{{"{CATALOG_TOPIC}": {{"0": {start}}}}}')
                  .option("endingOffsets", f'{{"{CATALOG_TOPIC}": {{"0": {min(start + batch, end)}}}}}')
                  .option("minPartitions", str(split)))
        for key, value in DEFAULT_KAFKA_OPTIONS.items():
            reader = reader.option(key, value)
        return reader.load().select(*KAFKA_COLUMNS)

    def count(start: int) -> int:
        return int(between(start).agg(F.count("*")).collect()[0][0])

    def arrow(start: int) -> int:
        return int(between(start).toArrow().num_rows)

    def decoded(start: int) -> int:
        table = between(start).toArrow()
        with paused_gc():
            return len(decode_batch(table))

    def in_tasks(start: int) -> int:
        answered = between(start).mapInArrow(_decoded_in_task, "records long, pid long").collect()
        return sum(row.records for row in answered)

    reads: dict[str, Callable[[int], int]] = {"count": count, "arrow": arrow, "decoded": decoded,
                                              "tasks": in_tasks}
    processes = Processes(broker_pid)
    results: dict[str, Any] = {}
    try:
        for way in WAYS:  # untimed: the JVM's and the workers' first queries plan, compile, start
            reads[way](0)
        total_bytes = sum(between(start).agg(F.sum(F.length("value"))).collect()[0][0]
                          for start in range(0, end, batch))
        results["mean_record_bytes"] = round(total_bytes / end)
        for batch, split in ((b, t) for b in batches for t in tasks):
            for way in WAYS:
                print(f"  {way}: {end:,} events in batches of {batch:,}, {split} task(s) each", flush=True)
                before, started = processes.reading(), time.perf_counter()
                records = sum(reads[way](start) for start in range(0, end, batch))
                seconds = time.perf_counter() - started
                after = processes.reading()
                if records != end:
                    raise RuntimeError(f"{way} read {records:,} records of {end:,}")
                name = f"{way}, {batch:,} x {split}"
                results[name] = {
                    "events_per_s": round(records / seconds), "seconds": round(seconds, 2),
                    **{f"{name}_cores": round((after[name] - before.get(name, 0.0)) / seconds, 2)
                       for name in after}}
                print(f"    {results[name]}", flush=True)
    finally:
        spark.stop()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.source", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=1_000_000, help="registrations in the log")
    parser.add_argument("--batches", default="200000,20000",
                        help="offsets per batch query, comma-separated: each is measured")
    parser.add_argument("--tasks", default="2,1",
                        help="tasks per batch (minPartitions), comma-separated: each is measured")
    parser.add_argument("--work-dir", type=Path, default=Path(tempfile.gettempdir()) / "strata-bench-source")
    args = parser.parse_args()

    args.work_dir.mkdir(parents=True, exist_ok=True)
    pool = RecordingPool(args.work_dir / "recordings")
    broker = EmbeddedBroker(Path(tempfile.mkdtemp(dir=args.work_dir, prefix="kafka-")))
    broker.start()
    try:
        bootstrap = broker.bootstrap_servers
        ensure_topics(bootstrap)
        producer = EventProducer(bootstrap)
        try:
            started = time.perf_counter()
            _produce(producer, log_events(pool, events=args.events, segments=args.events), args.events)
        finally:
            producer.close()
        end = end_offsets(bootstrap)[(CATALOG_TOPIC, 0)]
        print(f"{end:,} events produced in {time.perf_counter() - started:.0f} s", flush=True)
        assert broker.pid is not None
        reads = measure(bootstrap, broker.pid, batches=[int(b) for b in args.batches.split(",")],
                        tasks=[int(t) for t in args.tasks.split(",")], end=end)
        results = {"events": end, "mean_record_bytes": reads.pop("mean_record_bytes"),
                   "cpus": os.cpu_count(), "reads": reads}
    finally:
        broker.stop()
    write_results(results, "source")


def write_results(results: dict[str, Any], name: str) -> None:
    day = datetime.date.today().isoformat()
    RESULTS_DIR.mkdir(exist_ok=True)
    (RESULTS_DIR / f"{day}-{name}.json").write_text(json.dumps(results, indent=2) + "\n")
    reads = results["reads"]
    groups = [key.removesuffix("_cores") for key in next(iter(reads.values())) if key.endswith("_cores")]
    lines = [f"{results['events']:,} registrations of {results['mean_record_bytes']:,} bytes on average, "
             f"{results['cpus']} CPUs; CPU in cores (CPU seconds per second of the read)", "",
             "| read, offsets per batch x tasks per batch | events/s | " + " | ".join(groups) + " |",
             "|---|---:|" + "---:|" * len(groups)]
    for read, row in reads.items():
        lines.append(f"| {read} | {row['events_per_s']:,} | "
                     + " | ".join(str(row[f"{g}_cores"]) for g in groups) + " |")
    (RESULTS_DIR / f"{day}-{name}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
